import { type ParseArgsConfig, parseArgs } from 'node:util'
import type { Config } from '../platform/config.js'

/**
 * A failure the user can act on: printed without a stack. 2: bad input; 1: the operation failed; a
 * refusal of docs/operations.md's table has its own (EXIT_STATUS).
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = 2,
  ) {
    super(message)
  }
}

/** Reads the settings (environment, .env); `overrides` take the place of environment variables. */
export type LoadConfig = (overrides?: Record<string, string>) => Config

type Options = NonNullable<ParseArgsConfig['options']>
type Values = Record<string, string | boolean | (string | boolean)[] | undefined>

export interface Subcommand {
  summary: string
  usage: string
  options: Options
  /** How many arguments besides options the command takes (a FILE); none when absent. */
  positionals?: number
  /** Resolves to the exit code, or to -1 when the process keeps running (serve). */
  run(values: Values, loadConfig: LoadConfig, positionals: string[]): Promise<number>
}

export interface CommandGroup {
  name: string
  summary: string
  subcommands: Record<string, Subcommand>
}

function groupUsage(group: CommandGroup): string {
  const width = Math.max(...Object.keys(group.subcommands).map((n) => n.length))
  const lines = Object.entries(group.subcommands).map(([n, c]) => `  ${n.padEnd(width)}  ${c.summary}`)
  return `Usage: wristband ${group.name} <command> [options]\n\n${group.summary}\n\nCommands:\n${lines.join('\n')}\n\nRun \`wristband ${group.name} <command> --help\` for the options of one command.`
}

/** Runs `wristband <group> <subcommand> [options]`. */
export async function runGroup(group: CommandGroup, argv: string[], loadConfig: LoadConfig): Promise<number> {
  const [name, ...rest] = argv
  if (name === undefined) throw new CliError(groupUsage(group))
  if (name === '--help' || name === '-h') {
    console.log(groupUsage(group))
    return 0
  }
  const sub = group.subcommands[name]
  if (!sub) throw new CliError(`wristband ${group.name}: unknown command "${name}"\n\n${groupUsage(group)}`)
  return runCommand(`${group.name} ${name}`, sub, rest, loadConfig)
}

/** Runs one command on its options; `--help` needs no configuration or database. */
export async function runCommand(
  title: string,
  sub: Subcommand,
  args: string[],
  loadConfig: LoadConfig,
): Promise<number> {
  let values: Values
  let positionals: string[]
  try {
    ;({ values, positionals } = parseArgs({
      args,
      options: { ...sub.options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: (sub.positionals ?? 0) > 0,
      strict: true,
    }) as { values: Values; positionals: string[] })
  } catch (err) {
    throw new CliError(`wristband ${title}: ${(err as Error).message}\n\n${sub.usage}`)
  }
  if (values.help) {
    console.log(sub.usage)
    return 0
  }
  if (positionals.length > (sub.positionals ?? 0))
    throw new CliError(`wristband ${title}: unexpected argument "${positionals.at(-1)}" (see --help)`)
  return sub.run(values, loadConfig, positionals)
}

/** An option's string value, trimmed; a CliError when required and missing or empty. */
export function stringOption(values: Values, name: string, command: string): string
export function stringOption(
  values: Values,
  name: string,
  command: string,
  optional: true,
): string | undefined
export function stringOption(values: Values, name: string, command: string, optional = false) {
  const v = values[name]
  if (typeof v === 'string' && v.trim() !== '') return v.trim()
  if (optional && v === undefined) return undefined
  throw new CliError(`wristband ${command}: --${name} is required (see --help)`)
}

export function integerOption(
  raw: string,
  name: string,
  command: string,
  min = 1,
  max = 2 ** 31 - 1,
): number {
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max)
    throw new CliError(
      `wristband ${command}: --${name} must be a whole number from ${min} to ${max}, got "${raw}"`,
    )
  return Number(raw)
}

/**
 * Prints a listing: one JSON object per line with `json`, else `empty` when there is nothing, else a
 * table under `header` with columns padded to their widest cell.
 */
export function printList<T>(
  items: readonly T[],
  opts: { json: boolean; empty: string; header: string[]; row: (item: T) => string[] },
): void {
  if (opts.json) {
    for (const item of items) console.log(JSON.stringify(item))
    return
  }
  if (items.length === 0) {
    console.log(opts.empty)
    return
  }
  const rows = [opts.header, ...items.map(opts.row)]
  const widths = opts.header.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  for (const r of rows) console.log(r.map((c, i) => c.padEnd(widths[i]!)).join('  '))
}
