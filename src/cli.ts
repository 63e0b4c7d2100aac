import fs from 'node:fs'
import { parseArgs } from 'node:util'
import { adminCommands } from './cli/admin.command.js'
import { apikeyCommands } from './cli/apikey.command.js'
import { auditCommand } from './cli/audit.command.js'
import { CliError, runCommand, runGroup } from './cli/command.js'
import { secretCommands } from './cli/secret.command.js'
import { systemClock } from './platform/clock.js'
import { type Config, ConfigError, loadConfig } from './platform/config.js'
import { formatMigrationStatus, openDatabase } from './platform/db/database.js'
import { applySeed, parseSeed, SeedError } from './seed/seed.js'
import { ServeError, serve } from './server.js'

const USAGE = `Usage: wristband <command>

Commands:
  serve [--workers N]
                   Run the service (HOST, PORT and the other settings come from the environment);
                   N processes share the port (default: one per core with REDIS_URL, else 1)
  migrate [--status]
                   Apply pending database migrations and exit; --status lists applied and
                   pending ones and changes nothing
  seed FILE|-      Create or update records from a seed document (- reads standard input);
                   prints the document back with every id filled in

Break-glass administration (each on the configured database, each recorded in the audit log):
  admin create|disable|enable|reset-mfa|reset-password
                   Administrator accounts, e.g. recover one locked out of MFA
  apikey create|list|revoke
                   Event API keys
  audit [--follow] Print the audit log
  secret generate  Print a new random secret for JWT_SECRET

Run \`wristband <command> --help\` for the options of a command.

Settings are environment variables; a .env file in the working directory may supply them.
See README.md for the full list.`

function readEnvFile(): void {
  if (fs.existsSync('.env')) process.loadEnvFile('.env')
}

async function withDatabase<T>(
  config: Config,
  fn: (h: Awaited<ReturnType<typeof openDatabase>>) => Promise<T>,
) {
  const handle = await openDatabase(config.databaseUrl, { schema: config.DATABASE_SCHEMA })
  try {
    await handle.migrate()
    return await fn(handle)
  } finally {
    await handle.close()
  }
}

function configFromEnvironment(overrides: Record<string, string> = {}): Config {
  readEnvFile()
  return loadConfig({ ...process.env, ...overrides })
}

const groups = { admin: adminCommands, apikey: apikeyCommands, secret: secretCommands }

async function main(argv: string[]): Promise<number> {
  const [first, ...args] = argv
  if (first !== undefined && Object.hasOwn(groups, first))
    return runGroup(groups[first as keyof typeof groups], args, configFromEnvironment)
  if (first === 'audit') return runCommand('audit', auditCommand, args, configFromEnvironment)
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      workers: { type: 'string' },
      status: { type: 'boolean' },
    },
    strict: true,
  })
  const [command, ...rest] = positionals
  if (values.help || !command) {
    console.log(USAGE)
    return command || values.help ? 0 : 2
  }
  readEnvFile()
  const config = loadConfig()
  switch (command) {
    case 'serve':
      await serve(config, values.workers === undefined ? undefined : Number(values.workers))
      return -1
    case 'migrate':
      if (values.status) {
        const handle = await openDatabase(config.databaseUrl, { schema: config.DATABASE_SCHEMA })
        try {
          console.log(formatMigrationStatus(await handle.migrationStatus()))
        } finally {
          await handle.close()
        }
        return 0
      }
      await withDatabase(config, async () => undefined)
      console.log('migrations applied')
      return 0
    case 'seed': {
      const file = rest[0]
      if (!file) {
        console.error('wristband seed: give a FILE, or - to read standard input')
        return 2
      }
      const raw = fs.readFileSync(file === '-' ? 0 : file, 'utf8')
      let parsed: unknown
      try {
        parsed = JSON.parse(raw)
      } catch (err) {
        throw new SeedError(`seed document is not JSON: ${(err as Error).message}`)
      }
      const doc = parseSeed(parsed)
      const out = await withDatabase(config, ({ db }) => applySeed(db, systemClock, doc))
      console.log(JSON.stringify(out, null, 2))
      return 0
    }
    default:
      console.error(`wristband: unknown command "${command}"\n\n${USAGE}`)
      return 2
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code)
  },
  (err) => {
    if (
      err instanceof ConfigError ||
      err instanceof SeedError ||
      err instanceof ServeError ||
      err instanceof CliError
    )
      console.error(err.message)
    else if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS'))
      console.error(`wristband: ${err.message}`)
    else console.error(err)
    if (err instanceof CliError) process.exit(err.exitCode)
    process.exit(err instanceof ConfigError || err instanceof SeedError || err instanceof ServeError ? 2 : 1)
  },
)
