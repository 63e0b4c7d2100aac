import { setTimeout as sleep } from 'node:timers/promises'
import { type AuditRow, tailAuditLog } from '../audit/audit.service.js'
import { audited, integerOption, type Subcommand, stringOption, withContext } from './command.js'

// How often --follow looks for new entries: quick enough to watch an incident, light on the database.
const FOLLOW_INTERVAL_MS = 500

/**
 * Characters a terminal may act on or that change how a line reads: C0 controls (newline, ESC…), DEL,
 * C1 controls (U+009B is a one-character CSI on some terminals), the line and paragraph separators and
 * the bidirectional overrides and isolates (text that reads in another order than it is stored).
 */
const UNSAFE_CHARACTERS = '\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069'
const UNSAFE = new RegExp(`[${UNSAFE_CHARACTERS}]`, 'g')
/** Plain: no space, quote, backslash or unsafe character. */
const PLAIN = new RegExp(`^[^\\s"\\\\${UNSAFE_CHARACTERS}]+$`)
const escapeUnsafe = (text: string) =>
  text.replace(UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)

/**
 * An audited value as the plain output prints it: as it is when it is plain (no space, quote,
 * backslash or unsafe character), else as a JSON string with every unsafe character escaped, so a
 * typed e-mail can neither start a line of its own nor pass for another field (`actor=x  ip=…`).
 */
function printable(value: string): string {
  if (PLAIN.test(value)) return value
  return escapeUnsafe(JSON.stringify(value))
}

/**
 * One entry, as text or as one JSON line. Actors, addresses and details hold what clients typed (a
 * failed sign-in's e-mail): both forms escape every control character, ESC included, so the output
 * of `wristband audit` in a terminal shows them and never runs them.
 */
function formatAuditRow(row: AuditRow, json: boolean): string {
  const detail = row.detail === null ? null : (JSON.parse(row.detail) as unknown)
  if (json) return escapeUnsafe(JSON.stringify({ ...row, at: new Date(row.at).toISOString(), detail }))
  return [
    new Date(row.at).toISOString(),
    printable(row.kind),
    printable(row.outcome),
    `actor=${row.actor === null ? '-' : printable(row.actor)}`,
    `ip=${row.ip === null ? '-' : printable(row.ip)}`,
    detail === null ? '' : escapeUnsafe(JSON.stringify(detail)),
  ]
    .join('  ')
    .trimEnd()
}

export const auditCommand: Subcommand = {
  summary: 'Print the audit log',
  usage: `Usage: wristband audit [--follow] [--kind KIND] [--limit N] [--json]

Prints the newest audit-log entries, oldest first; with --follow keeps printing new ones until
interrupted (Ctrl-C). Reading the log is itself recorded in it.

Options:
  --follow, -f         keep printing entries as they are written
  --kind KIND          only entries of this kind (e.g. login_failed, cli_admin_create)
  --limit N            how many of the newest entries to print first (default 50, at most 10000)
  --json               one JSON object per line`,
  options: {
    follow: { type: 'boolean', short: 'f' },
    kind: { type: 'string' },
    limit: { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(values, loadConfig) {
    const command = 'audit'
    const kind = stringOption(values, 'kind', command, true)
    const rawLimit = stringOption(values, 'limit', command, true)
    const limit = rawLimit === undefined ? 50 : integerOption(rawLimit, 'limit', command, 1, 10_000)
    const json = Boolean(values.json)
    // Listening for the stop signal from the start: a signal that arrives while the first page is
    // being printed must still end the follow cleanly (exit 0), not kill the process.
    const stop = new AbortController()
    if (values.follow)
      for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => stop.abort())
    await withContext(loadConfig(), async (ctx) => {
      await audited(ctx, 'cli_audit_read', async () => ({
        detail: { follow: Boolean(values.follow), kind: kind ?? null, limit },
      }))
      const filter = kind === undefined ? {} : { kind }
      let last = 0
      const print = (rows: AuditRow[]) => {
        for (const r of rows) {
          console.log(formatAuditRow(r, json))
          last = r.id
        }
      }
      print(await tailAuditLog(ctx.db, { ...filter, limit }))
      if (!values.follow) return
      while (!stop.signal.aborted) {
        print(await tailAuditLog(ctx.db, { ...filter, afterId: last, limit: 1000 }))
        await sleep(FOLLOW_INTERVAL_MS, undefined, { signal: stop.signal }).catch(() => undefined)
      }
    })
    return 0
  },
}
