import cluster from 'node:cluster'
import fs from 'node:fs'
import {
  CliError,
  type CommandGroup,
  integerOption,
  runCommand,
  runGroup,
  type Subcommand,
} from './cli/command.js'
import { type Config, ConfigError, configWarnings, loadConfig, settingWarnings } from './platform/config.js'
import { formatMigrationStatus, openDatabase } from './platform/db/database.js'
import { databaseUnavailable, EXIT_STATUS, listenFailure, StartupError } from './platform/startup.js'
import { releaseVersion } from './platform/version.js'
import { ServeError, serve } from './server.js'

/**
 * `wristband --help`. The break-glass groups are listed from the table `main` dispatches on (`groups`),
 * each with every command it runs, so the help cannot forget one (src/cli/help.test.ts compares them).
 */
async function usage(): Promise<string> {
  const breakGlass = (await Promise.all(Object.values(groups).map((load) => load()))).map(
    (g) => `  ${g.name} ${Object.keys(g.subcommands).join('|')}\n                   ${g.summary}`,
  )
  return `Usage: wristband <command> [options]

Commands:
  serve [--workers N]
                   Run the service (HOST, PORT and the other settings come from the environment);
                   N processes share the port (default: one per core with Redis, else 1)
  migrate [--status]
                   Apply pending database migrations and exit; --status lists applied and
                   pending ones and changes nothing
  seed FILE|-      Create or update records from a seed document (- reads standard input)
  backup FILE      Copy the SQLite database to FILE while the service runs

Break-glass administration (each on the configured database, each recorded in the audit log):
${breakGlass.join('\n')}
  audit [--follow] Print the audit log

Options:
  -h, --help       This text; \`wristband <command> --help\` shows the options of a command
  -V, --version    The version of wristband

Settings are environment variables; a .env file in the working directory may supply them.
See README.md for the full list.`
}

function readEnvFile(): void {
  if (fs.existsSync('.env')) process.loadEnvFile('.env')
}

async function withDatabase<T>(
  config: Config,
  fn: (h: Awaited<ReturnType<typeof openDatabase>>) => Promise<T>,
) {
  let handle: Awaited<ReturnType<typeof openDatabase>> | undefined
  try {
    handle = await openDatabase(config.databaseUrl, { schema: config.DATABASE_SCHEMA })
    await handle.migrate()
  } catch (err) {
    await handle?.close().catch(() => undefined)
    throw databaseUnavailable(config.databaseUrl, err)
  }
  try {
    return await fn(handle)
  } finally {
    await handle.close()
  }
}

function configFromEnvironment(overrides: Record<string, string> = {}): Config {
  readEnvFile()
  // Workers of `serve --workers N` run this too; the primary has warned once.
  if (cluster.isPrimary)
    for (const w of settingWarnings(process.env)) console.error(`wristband: warning: ${w}`)
  return loadConfig({ ...process.env, ...overrides })
}

/** The version in package.json (two folders up from dist/src/cli.js, one from src/cli.ts). */
const version = releaseVersion

const serveCommand: Subcommand = {
  summary: 'Run the service',
  usage: `Usage: wristband serve [--workers N]

Runs the service on HOST:PORT with the settings of the environment (and .env), applying pending
migrations first. It stops on SIGTERM or SIGINT after the requests in flight are answered.

Options:
  --workers N      N processes share the port (node:cluster). Default: one per core when REDIS_URL (or
                   REDIS_SENTINELS) is set, else 1; more than one needs Redis (workers share
                   revocations and rate limits through it)`,
  options: { workers: { type: 'string' } },
  async run(values, loadConfig) {
    const raw = values.workers
    const workers = typeof raw === 'string' ? integerOption(raw, 'workers', 'serve', 1, 1024) : undefined
    const config = loadConfig()
    if (cluster.isPrimary) for (const w of configWarnings(config)) console.error(`wristband: warning: ${w}`)
    await serve(config, workers)
    return -1
  },
}

const migrateCommand: Subcommand = {
  summary: 'Apply pending database migrations and exit',
  usage: `Usage: wristband migrate [--status]

Applies the pending migrations to the configured database (DATABASE_URL) and exits. \`serve\` does the
same at start; run this first to migrate once before starting several instances.

Options:
  --status         List applied and pending migrations (and those of a newer release the database
                   holds) and change nothing`,
  options: { status: { type: 'boolean' } },
  async run(values, loadConfig) {
    const config = loadConfig()
    if (values.status) {
      const handle = await openDatabase(config.databaseUrl, { schema: config.DATABASE_SCHEMA }).catch(
        (err) => {
          throw databaseUnavailable(config.databaseUrl, err)
        },
      )
      try {
        console.log(
          formatMigrationStatus(
            await handle.migrationStatus().catch((err) => {
              throw databaseUnavailable(config.databaseUrl, err)
            }),
          ),
        )
      } finally {
        await handle.close()
      }
      return 0
    }
    await withDatabase(config, async () => undefined)
    console.log('migrations applied')
    return 0
  },
}

/**
 * The break-glass groups and the other commands, each module loaded when it runs or the help lists it:
 * `serve`, the primary process of every fleet, loads none of them (nor the app: src/server.ts), only
 * what it needs before it forks, the configuration and the migrations.
 */
const groups: Record<string, () => Promise<CommandGroup>> = {
  admin: async () => (await import('./cli/admin.command.js')).adminCommands,
  apikey: async () => (await import('./cli/apikey.command.js')).apikeyCommands,
  device: async () => (await import('./cli/device.command.js')).deviceCommands,
  secret: async () => (await import('./cli/secret.command.js')).secretCommands,
}
const commands: Record<string, () => Promise<Subcommand>> = {
  serve: async () => serveCommand,
  migrate: async () => migrateCommand,
  seed: async () => (await import('./cli/seed.command.js')).seedCommand,
  backup: async () => (await import('./cli/backup.command.js')).backupCommand,
  audit: async () => (await import('./cli/audit.command.js')).auditCommand,
}

async function main(argv: string[]): Promise<number> {
  const [first, ...args] = argv
  if (first === undefined) {
    console.error(await usage())
    return 2
  }
  if (first === '--help' || first === '-h' || first === 'help') {
    console.log(await usage())
    return 0
  }
  if (first === '--version' || first === '-V') {
    console.log(version())
    return 0
  }
  if (Object.hasOwn(groups, first)) return runGroup(await groups[first]!(), args, configFromEnvironment)
  if (Object.hasOwn(commands, first))
    return runCommand(first, await commands[first]!(), args, configFromEnvironment)
  if (first.startsWith('-')) throw new CliError(`wristband: unknown option "${first}" (see wristband --help)`)
  throw new CliError(`wristband: unknown command "${first}"\n\n${await usage()}`)
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code)
  },
  (err) => {
    // What a user can act on is one line without a stack, with its own exit status (EXIT_STATUS);
    // anything else is a bug, shown in full.
    const known = err instanceof StartupError ? err : listenFailure(err)
    if (known) {
      console.error(`wristband: ${known.message}`)
      process.exit(known.exitStatus)
    }
    if (err instanceof ConfigError) {
      console.error(err.message)
      process.exit(err.exitStatus)
    }
    if (err instanceof ServeError) {
      console.error(err.message)
      process.exit(EXIT_STATUS.usage)
    }
    if (err instanceof CliError) {
      console.error(err.message)
      process.exit(err.exitCode)
    }
    console.error(err)
    process.exit(EXIT_STATUS.unexpected)
  },
)
