import fs from 'node:fs'
import { EXIT_STATUS } from '../platform/startup.js'
import { applySeed, parseSeed, type SeedDocument, SeedError } from '../seed/seed.js'
import { CliError, type LoadConfig, type Subcommand } from './command.js'
import { withContext } from './context.js'

export const seedCommand: Subcommand = {
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
    try {
      return await seedFile(loadConfig, file)
    } catch (err) {
      // A document the command refuses is bad input (exit status 2), as a bad option is.
      if (err instanceof SeedError) throw new CliError(err.message, EXIT_STATUS.usage)
      throw err
    }
  },
}

async function seedFile(loadConfig: LoadConfig, file: string | undefined): Promise<number> {
  {
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
  }
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
