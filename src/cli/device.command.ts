import {
  createSetupCode,
  DEVICE_KEY_PREFIX,
  findDevice,
  listDevices,
  newDeviceKey,
  registerDevice,
  retireDevice,
  rotateDeviceKey,
  SETUP_CODE_PREFIX,
  setupUrl,
} from '../devices/devices.service.js'
import { qrTerminal } from '../edge/qr.js'
import type { Db } from '../platform/db/database.js'
import type { Revocation } from '../tokens/revocations.js'
import {
  CliError,
  type CommandGroup,
  integerOption,
  printList,
  type Subcommand,
  stringOption,
} from './command.js'
import { audited, type CliContext, withContext } from './context.js'

const KEY_NOTE = `The key (${DEVICE_KEY_PREFIX}…) is printed once; only its SHA-256 is stored. The device sends it as
\`device_key\` to POST /devices/auth and POST /auth/login/device.`

const create: Subcommand = {
  summary: 'Register a device with a device key',
  usage: `Usage: wristband device create --event ID --mac MAC [--operator-id ID]

Registers a device at an event with a new device key. ${KEY_NOTE}
Recorded in the audit log (never the key). A device already registered (by seed or earlier) gets a
key with \`wristband device rotate-key\`.

Options:
  --event ID           the event the device belongs to
  --mac MAC            the device's hardware address (dev_mac, 1 to 64 characters)
  --operator-id ID     the operator of that event the device acts as (else set later by
                       POST /devices/{device_id}/token)`,
  options: { event: { type: 'string' }, mac: { type: 'string' }, 'operator-id': { type: 'string' } },
  async run(values, loadConfig) {
    const command = 'device create'
    const eventId = integerOption(stringOption(values, 'event', command), 'event', command)
    const mac = stringOption(values, 'mac', command)
    if (mac.length > 64) throw new CliError(`wristband ${command}: --mac must be at most 64 characters`)
    const operatorRaw = stringOption(values, 'operator-id', command, true)
    const operatorId = operatorRaw === undefined ? null : integerOption(operatorRaw, 'operator-id', command)
    const { key, hash } = newDeviceKey()
    // Why registerDevice refused, in the order it checks.
    const refusals = {
      no_event: `no event with id ${eventId}`,
      mac_taken: `a device with MAC ${mac} exists; give it a key with \`wristband device rotate-key\``,
      no_operator: `no operator ${operatorId} at event ${eventId}`,
    }
    const created = await withContext(loadConfig(), (ctx) =>
      audited(ctx, 'cli_device_create', async (tx) => {
        const registered = await registerDevice(tx, {
          mac,
          eventId,
          operatorId,
          keyHash: hash,
          now: ctx.clock.now(),
        })
        if ('refused' in registered)
          throw new CliError(`wristband ${command}: ${refusals[registered.refused]}`, 1)
        const { id } = registered
        return { id, detail: { device_id: id, dev_mac: mac, event_id: eventId, operator_id: operatorId } }
      }),
    )
    console.log(`created device ${created.id} (${mac}) at event ${eventId}`)
    console.log(`device key (shown only now): ${key}`)
    return 0
  },
}

/** The device named by --id or --mac (exactly one of them). */
function deviceSelector(values: Parameters<Subcommand['run']>[0], command: string) {
  const idRaw = stringOption(values, 'id', command, true)
  const mac = stringOption(values, 'mac', command, true)
  if ((idRaw === undefined) === (mac === undefined))
    throw new CliError(`wristband ${command}: give either --id or --mac`)
  const id = idRaw === undefined ? undefined : integerOption(idRaw, 'id', command)
  return async (tx: Db) => {
    const device = await findDevice(tx, id === undefined ? { mac: mac! } : { id })
    if (!device) throw new CliError(`wristband ${command}: no device ${id ?? mac}`, 1)
    return device
  }
}

/**
 * Tells the running instances at once (Redis) that a device's tokens ended; without Redis they read it
 * from the database within REVOCATION_POLL_MS.
 */
async function publish(ctx: CliContext, entry: Revocation | undefined): Promise<void> {
  if (entry) await ctx.authority.revoke([entry])
}

const ENDS_TOKENS = `Every offline token issued to the device so far stops working at once on every instance (within
REVOCATION_POLL_MS without Redis); the device signs in again for a new one.`

const rotateKey: Subcommand = {
  summary: 'Give a device a new key and end its offline tokens',
  usage: `Usage: wristband device rotate-key (--id ID | --mac MAC)

Replaces the device's key with a new one, or gives a key-less device its first key; from then on
the device must present it. ${KEY_NOTE}
${ENDS_TOKENS} Recorded in the audit log.

Options:
  --id ID              the device's id (see \`wristband device list\`)
  --mac MAC            or its hardware address (in either case)`,
  options: { id: { type: 'string' }, mac: { type: 'string' } },
  async run(values, loadConfig) {
    const command = 'device rotate-key'
    const select = deviceSelector(values, command)
    const { key, hash } = newDeviceKey()
    const rotated = await withContext(loadConfig(), async (ctx) => {
      const done = await audited(ctx, 'cli_device_rotate_key', async (tx) => {
        const device = await select(tx)
        const ended = await rotateDeviceKey(tx, device.id, hash, ctx.clock.now())
        return { device, ended, detail: { device_id: device.id, dev_mac: device.dev_mac } }
      })
      await publish(ctx, done.ended)
      return done
    })
    console.log(
      `new key for device ${rotated.device.id} (${rotated.device.dev_mac}); its offline tokens are revoked`,
    )
    console.log(`device key (shown only now): ${key}`)
    return 0
  },
}

const revoke: Subcommand = {
  summary: "End a device's offline tokens (a lost or stolen scanner), optionally archiving it",
  usage: `Usage: wristband device revoke (--id ID | --mac MAC) [--archive]

${ENDS_TOKENS} With --archive the device can no longer sign in at all (a stolen
scanner); without it, it can, with its key when it has one (a key-less device needs only its MAC and
event id: rotate-key gives it a key). Recorded in the audit log.

Options:
  --id ID              the device's id (see \`wristband device list\`)
  --mac MAC            or its hardware address (in either case)
  --archive            also archive the device`,
  options: { id: { type: 'string' }, mac: { type: 'string' }, archive: { type: 'boolean' } },
  async run(values, loadConfig) {
    const command = 'device revoke'
    const select = deviceSelector(values, command)
    const archive = values.archive === true
    const { device } = await withContext(loadConfig(), async (ctx) => {
      const done = await audited(ctx, 'cli_device_revoke', async (tx) => {
        const device = await select(tx)
        const { archived, ended } = await retireDevice(tx, device.id, archive, ctx.clock.now())
        return { device, ended, detail: { device_id: device.id, dev_mac: device.dev_mac, archived } }
      })
      await publish(ctx, done.ended)
      return done
    })
    console.log(
      `offline tokens of device ${device.id} (${device.dev_mac}) revoked${archive ? '; the device is archived' : ''}`,
    )
    return 0
  },
}

const iso = (ms: number) => new Date(ms).toISOString()

const setupCode: Subcommand = {
  summary: 'A one-time set-up code for a device, printed as a QR code and as text',
  usage: `Usage: wristband device setup-code ID

Creates a set-up code (${SETUP_CODE_PREFIX}…) for the device and prints it as a QR code and as text. The
QR code holds PUBLIC_BASE_URL/scanner/#setup=<code>: a phone that opens it gets the service's scanner
page, which exchanges the code (POST /devices/setup) for the device's id, MAC, event and a new device
key, signs in and syncs. The code works once, within DEVICE_SETUP_CODE_MINUTES (10); a new one replaces
the device's earlier unused code; only its SHA-256 is stored. The new key ends the device's earlier
offline tokens when the code is exchanged. The device must act as an operator of its event (\`wristband
device create --operator-id\`, or POST /devices/{device_id}/token). Recorded in the audit log (never the
code).`,
  options: {},
  positionals: 1,
  async run(_values, loadConfig, positionals) {
    const command = 'device setup-code'
    const [idRaw] = positionals
    if (idRaw === undefined || positionals.length !== 1)
      throw new CliError(`wristband ${command}: give the device's id (see \`wristband device list\`)`)
    const deviceId = integerOption(idRaw, 'id', command)
    const config = loadConfig()
    const refusals = {
      no_device: `no device ${deviceId} (or it is archived)`,
      no_access: `no device ${deviceId}`,
      no_operator: `device ${deviceId} acts as no operator of its event: set one first (POST /devices/${deviceId}/token)`,
    }
    const made = await withContext(config, (ctx) =>
      audited(ctx, 'cli_device_setup_code', async (tx) => {
        const r = await createSetupCode(tx, {
          deviceId,
          createdBy: 'cli',
          now: ctx.clock.now(),
          minutes: config.DEVICE_SETUP_CODE_MINUTES,
        })
        if ('refused' in r) throw new CliError(`wristband ${command}: ${refusals[r.refused]}`, 1)
        return { ...r, detail: { device_id: deviceId, expires_at: iso(r.expiresAt) } }
      }),
    )
    const url = setupUrl(config.PUBLIC_BASE_URL, made.code)
    console.log(
      `set-up code for device ${made.device.id} (${made.device.dev_mac}) at event ${made.device.event_id}, usable once until ${iso(made.expiresAt)}:`,
    )
    console.log(await qrTerminal(url))
    console.log(`code: ${made.code}`)
    console.log(`url:  ${url}`)
    return 0
  },
}

const list: Subcommand = {
  summary: 'List devices and whether each has a key',
  usage: `Usage: wristband device list [--event ID] [--json]

Lists the devices (of one event), archived ones included, with whether each has a device key (the
keys themselves are never stored). Without a key a device logs in with its MAC and event id alone,
unless DEVICE_KEYS_REQUIRED=true. Recorded in the audit log.

Options:
  --event ID           only this event's devices
  --json               one JSON object per line instead of a table`,
  options: { event: { type: 'string' }, json: { type: 'boolean' } },
  async run(values, loadConfig) {
    const command = 'device list'
    const eventRaw = stringOption(values, 'event', command, true)
    const eventId = eventRaw === undefined ? undefined : integerOption(eventRaw, 'event', command)
    const { devices } = await withContext(loadConfig(), (ctx) =>
      audited(ctx, 'cli_device_list', async (tx) => {
        const devices = await listDevices(tx, eventId)
        return { devices, detail: { event_id: eventId ?? null, count: devices.length } }
      }),
    )
    printList(devices, {
      json: Boolean(values.json),
      empty: eventId === undefined ? 'no devices' : `no devices at event ${eventId}`,
      header: ['ID', 'MAC', 'EVENT', 'OPERATOR', 'KEY', 'ARCHIVED', 'CREATED'],
      row: (d) => [
        String(d.id),
        d.dev_mac,
        String(d.event_id),
        d.operator_id === null ? '-' : String(d.operator_id),
        d.has_key ? 'yes' : 'no',
        d.archived ? 'yes' : 'no',
        iso(d.created_at),
      ],
    })
    return 0
  },
}

export const deviceCommands: CommandGroup = {
  name: 'device',
  summary: 'Devices and their device keys on the configured database.',
  subcommands: { create, 'rotate-key': rotateKey, revoke, list, 'setup-code': setupCode },
}
