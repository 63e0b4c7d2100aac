import { VERIFY_SCOPE } from '../api-keys/api-key.credential.js'
import { createKeyForEvent, getApiKey, listApiKeys, revokeKey } from '../api-keys/api-keys.service.js'
import { BASELINE_SCOPES } from '../identities/grants.js'
import {
  CliError,
  type CommandGroup,
  integerOption,
  printList,
  type Subcommand,
  stringOption,
} from './command.js'
import { audited, withContext } from './context.js'

/** The partner API's scopes (the default) and a verify credential's. */
const DEFAULT_SCOPES: readonly string[] = BASELINE_SCOPES.event_client
const SCOPES: readonly string[] = [...DEFAULT_SCOPES, VERIFY_SCOPE]

function parseScopes(raw: string | undefined, command: string): string[] {
  if (raw === undefined) return [...DEFAULT_SCOPES]
  const scopes = [
    ...new Set(
      raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ]
  const unknown = scopes.filter((s) => !SCOPES.includes(s))
  if (scopes.length === 0 || unknown.length > 0)
    throw new CliError(
      `wristband ${command}: --scopes must be a comma-separated list of ${SCOPES.join(', ')}` +
        (unknown.length ? `; unknown: ${unknown.join(', ')}` : ''),
    )
  return scopes
}

const iso = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString())

const create: Subcommand = {
  summary: 'Create an API key for an event',
  usage: `Usage: wristband apikey create --event ID --name NAME [--partner NAME] [--scopes api:read,api:write]

Creates an event API key (role event_client) and prints it once: only its SHA-256 hash is stored.
Recorded in the audit log (never the key).

Options:
  --event ID           the event the key belongs to
  --name NAME          a label to tell keys apart (1 to 100 characters)
  --partner NAME       the ticket partner the key belongs to (1 to 100 characters); a new key for the
                       same partner sees its transfers, receiver and deliveries (rotation). Default: a
                       partner of its own
  --scopes LIST        comma-separated scopes among ${SCOPES.join(', ')} (default: ${DEFAULT_SCOPES.join(',')});
                       ${VERIFY_SCOPE} makes a verify credential, which a backend sends as api_key with
                       POST /tokens/verify to be limited per key (VERIFY_CLIENT_RATE_LIMIT)`,
  options: {
    event: { type: 'string' },
    name: { type: 'string' },
    partner: { type: 'string' },
    scopes: { type: 'string' },
  },
  async run(values, loadConfig) {
    const command = 'apikey create'
    const eventId = integerOption(stringOption(values, 'event', command), 'event', command)
    const name = stringOption(values, 'name', command)
    if (name.length > 100) throw new CliError(`wristband ${command}: --name must be at most 100 characters`)
    const scopes = parseScopes(stringOption(values, 'scopes', command, true), command)
    const partnerName = stringOption(values, 'partner', command, true)
    if (partnerName !== undefined && (partnerName.length < 1 || partnerName.length > 100))
      throw new CliError(`wristband ${command}: --partner must be 1 to 100 characters`)
    const created = await withContext(loadConfig(), (ctx) =>
      audited(ctx, 'cli_apikey_create', async (tx) => {
        const created = await createKeyForEvent(tx, {
          event_id: eventId,
          name,
          scopes,
          created_by: 'cli',
          now: ctx.clock.now(),
          partner: partnerName,
        })
        if (!created) throw new CliError(`wristband ${command}: no event with id ${eventId}`, 1)
        const { record, plaintext, partner } = created
        return {
          record,
          plaintext,
          partner,
          detail: { key_id: record.id, event_id: eventId, name, scopes, partner },
        }
      }),
    )
    console.log(
      `created API key ${created.record.id} for event ${eventId} (${name}; partner ${created.partner}; ${scopes.join(', ')})`,
    )
    console.log(`api key (shown only now): ${created.plaintext}`)
    return 0
  },
}

const list: Subcommand = {
  summary: "List an event's API keys",
  usage: `Usage: wristband apikey list --event ID [--json]

Lists the API keys of an event, revoked ones included (the keys themselves are never stored).
Recorded in the audit log.

Options:
  --event ID           the event
  --json               one JSON object per line instead of a table`,
  options: { event: { type: 'string' }, json: { type: 'boolean' } },
  async run(values, loadConfig) {
    const command = 'apikey list'
    const eventId = integerOption(stringOption(values, 'event', command), 'event', command)
    const { keys } = await withContext(loadConfig(), (ctx) =>
      audited(ctx, 'cli_apikey_list', async (tx) => {
        const keys = await listApiKeys(tx, eventId)
        return { keys, detail: { event_id: eventId, count: keys.length } }
      }),
    )
    printList(keys, {
      json: Boolean(values.json),
      empty: `no API keys for event ${eventId}`,
      header: ['ID', 'NAME', 'PREFIX', 'SCOPES', 'CREATED', 'LAST USED', 'REVOKED'],
      row: (k) => [
        String(k.id),
        k.name,
        k.key_prefix,
        k.scopes.join(','),
        iso(k.created_at),
        iso(k.last_used_at),
        iso(k.revoked_at),
      ],
    })
    return 0
  },
}

const revoke: Subcommand = {
  summary: 'Revoke an API key',
  usage: `Usage: wristband apikey revoke --id ID

Revokes an API key at once: its stored hash is cleared, so every later check refuses it (callers
that cache a verification answer may accept it for up to 60 s more). Recorded in the audit log.

Options:
  --id ID              the key's id (see \`wristband apikey list\`)`,
  options: { id: { type: 'string' } },
  async run(values, loadConfig) {
    const command = 'apikey revoke'
    const id = integerOption(stringOption(values, 'id', command), 'id', command)
    await withContext(loadConfig(), async (ctx) => {
      const revoked = await audited(ctx, 'cli_apikey_revoke', async (tx) => {
        const key = await getApiKey(tx, id)
        if (!key) throw new CliError(`wristband ${command}: no API key with id ${id}`, 1)
        const revocation = await revokeKey(tx, id, ctx.clock.now())
        if (!revocation) throw new CliError(`wristband ${command}: API key ${id} is already revoked`, 1)
        return { revocation, detail: { key_id: id, event_id: key.event_id, name: key.name } }
      })
      // Running instances remember keys for up to 60 s: the revocation list makes them drop it now.
      await ctx.authority.revoke([revoked.revocation])
    })
    console.log(`revoked API key ${id}`)
    return 0
  },
}

export const apikeyCommands: CommandGroup = {
  name: 'apikey',
  summary: 'Event API keys on the configured database.',
  subcommands: { create, list, revoke },
}
