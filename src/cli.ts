import cluster from 'node:cluster'
import fs from 'node:fs'
import { adminCommands } from './cli/admin.command.js'
import { apikeyCommands } from './cli/apikey.command.js'
import { auditCommand } from './cli/audit.command.js'
import { backupCommand } from './cli/backup.command.js'
import {
  CliError,
  type CommandGroup,
  integerOption,
  runCommand,
  runGroup,
  type Subcommand,
  withContext,
} from './cli/command.js'
import { deviceCommands } from './cli/device.command.js'
import { secretCommands } from './cli/secret.command.js'
import { type Config, ConfigError, configWarnings, loadConfig, settingWarnings } from './platform/config.js'
import { formatMigrationStatus, openDatabase } from './platform/db/database.js'
import { databaseUnavailable, EXIT_STATUS, listenFailure, StartupError } from './platform/startup.js'
import { releaseVersion } from './platform/version.js'
import { applySeed, parseSeed, type SeedDocument, SeedError } from './seed/seed.js'
import { ServeError, serve } from './server.js'

/**
 * `wristband --help`. The break-glass groups are listed from the table `main` dispatches on (`groups`),
 * each with every command it runs, so the help cannot forget one (src/cli/help.test.ts compares them).
 */
function usage(): string {
  const breakGlass = Object.values(groups).map(
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

const seedCommand: Subcommand = {
  summary: 'Create or update records from a seed document',
  usage: `Usage: wristband seed FILE|-

Creates or updates records from a JSON seed document (- reads it from standard input), in one
transaction: records are matched by event id or uid, e-mail, phone, dev_mac or username, so a second
run updates instead of duplicating. Prints the document back with every id filled in and the
passwords and device keys left out. Passwords are stored hashed (argon2id), device keys as SHA-256.

Format (every list optional; examples/seed.json is a complete example):
  {
    "events":           [{ "id": 1, "uid": "summer-fest-2026", "name": "Summer Fest",
                           "timezone": "Europe/Berlin" }],
    "administrators":   [{ "email": "root@example.com", "password": "…8 to 128 characters…",
                           "role": "superadmin" | "admin", "event_ids": [1] }],
    "network_managers": [{ "email": "…", "password": "…", "event_ids": [1] }],
    "operators":        [{ "email": "…", "password": "…", "event_id": 1 | null, "mode": 0,
                           "permissions": { "1": ["pos:sell", "ticket:scan"] } | null }],
    "customers":        [{ "phone": "+4915100000001", "password": "…", "email": "…",
                           "first_name": "…", "last_name": "…" }],
    "devices":          [{ "dev_mac": "AA:BB:CC:DD:EE:01", "event_id": 1,
                           "operator_email": "…" | null, "archived": false,
                           "device_key": "wbd_…" | null }],
    "dashboard_users":  [{ "username": "partner1", "password": "…", "event_ids": [1],
                           "partner": "Acme" | null }]
  }
An admin needs event_ids; a superadmin sees every event. A dashboard user's partner is the name its
partner's API keys give (it then sees that partner's deliveries and figures only); null unbinds,
absent keeps what is stored. Unknown fields are refused.`,
  options: {},
  positionals: 1,
  async run(_values, loadConfig, [file]) {
    if (!file) throw new CliError('wristband seed: give a FILE, or - to read standard input')
    let raw: string
    try {
      raw = fs.readFileSync(file === '-' ? 0 : file, 'utf8')
    } catch (err) {
      const e = err as NodeJS.ErrnoException
      throw new CliError(
        `wristband seed: cannot read ${file}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`,
      )
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(raw)
    } catch (err) {
      throw new SeedError(`seed document is not JSON: ${(err as Error).message}`)
    }
    const doc = parseSeed(parsed)
    const out = await withContext(loadConfig(), (ctx) =>
      applySeed(ctx.db, ctx.clock, doc, (revoked) => ctx.authority.revoke(revoked)),
    )
    console.log(JSON.stringify(withoutSecrets(out), null, 2))
    return 0
  },
}

/** The seeded document as printed: a terminal or a CI log is no place for passwords or device keys. */
function withoutSecrets(doc: SeedDocument): SeedDocument {
  return Object.fromEntries(
    Object.entries(doc).map(([list, records]) => [
      list,
      (records as Record<string, unknown>[]).map(
        ({ password: _password, device_key: _deviceKey, ...rest }) => rest,
      ),
    ]),
  ) as SeedDocument
}

const groups: Record<string, CommandGroup> = {
  admin: adminCommands,
  apikey: apikeyCommands,
  device: deviceCommands,
  secret: secretCommands,
}
const commands: Record<string, Subcommand> = {
  serve: serveCommand,
  migrate: migrateCommand,
  seed: seedCommand,
  backup: backupCommand,
  audit: auditCommand,
}

async function main(argv: string[]): Promise<number> {
  const [first, ...args] = argv
  if (first === undefined) {
    console.error(usage())
    return 2
  }
  if (first === '--help' || first === '-h' || first === 'help') {
    console.log(usage())
    return 0
  }
  if (first === '--version' || first === '-V') {
    console.log(version())
    return 0
  }
  if (Object.hasOwn(groups, first)) return runGroup(groups[first]!, args, configFromEnvironment)
  if (Object.hasOwn(commands, first)) return runCommand(first, commands[first]!, args, configFromEnvironment)
  if (first.startsWith('-')) throw new CliError(`wristband: unknown option "${first}" (see wristband --help)`)
  throw new CliError(`wristband: unknown command "${first}"\n\n${usage()}`)
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
    if (err instanceof SeedError || err instanceof ServeError) {
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
