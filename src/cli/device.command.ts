import { DEVICE_KEY_PREFIX, newDeviceKey } from '../devices/devices.service.js'
import {
  findDeviceByMac,
  findOperatorAtEvent,
  getDevice,
  insertDevice,
  listDevices,
  setDeviceKeyHash,
} from '../devices/devices.store.js'
import {
  audited,
  CliError,
  type CommandGroup,
  integerOption,
  requireEvent,
  type Subcommand,
  stringOption,
  withContext,
} from './command.js'

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
    const created = await withContext(loadConfig(), (ctx) =>
      audited(ctx, 'cli_device_create', async (tx) => {
        await requireEvent(tx, eventId, command)
        if (await findDeviceByMac(tx, mac))
          throw new CliError(
            `wristband ${command}: a device with MAC ${mac} exists; give it a key with \`wristband device rotate-key\``,
            1,
          )
        if (operatorId !== null && !(await findOperatorAtEvent(tx, operatorId, eventId)))
          throw new CliError(`wristband ${command}: no operator ${operatorId} at event ${eventId}`, 1)
        const id = await insertDevice(tx, {
          dev_mac: mac,
          event_id: eventId,
          operator_id: operatorId,
          key_hash: hash,
          created_at: ctx.clock.now(),
        })
        return { id, detail: { device_id: id, dev_mac: mac, event_id: eventId, operator_id: operatorId } }
      }),
    )
    console.log(`created device ${created.id} (${mac}) at event ${eventId}`)
    console.log(`device key (shown only now): ${key}`)
    return 0
  },
}

const rotateKey: Subcommand = {
  summary: 'Give a device a new key (the old one stops working at once)',
  usage: `Usage: wristband device rotate-key (--id ID | --mac MAC)

Replaces the device's key with a new one, or gives a key-less device its first key; from then on
the device must present it. ${KEY_NOTE}
Offline tokens already issued stay valid until they expire. Recorded in the audit log.

Options:
  --id ID              the device's id (see \`wristband device list\`)
  --mac MAC            or its hardware address`,
  options: { id: { type: 'string' }, mac: { type: 'string' } },
  async run(values, loadConfig) {
    const command = 'device rotate-key'
    const idRaw = stringOption(values, 'id', command, true)
    const mac = stringOption(values, 'mac', command, true)
    if ((idRaw === undefined) === (mac === undefined))
      throw new CliError(`wristband ${command}: give either --id or --mac`)
    const id = idRaw === undefined ? undefined : integerOption(idRaw, 'id', command)
    const { key, hash } = newDeviceKey()
    const rotated = await withContext(loadConfig(), (ctx) =>
      audited(ctx, 'cli_device_rotate_key', async (tx) => {
        const device = id === undefined ? await findDeviceByMac(tx, mac!) : await getDevice(tx, id)
        if (!device) throw new CliError(`wristband ${command}: no device ${id ?? mac}`, 1)
        await setDeviceKeyHash(tx, device.id, hash)
        return { device, detail: { device_id: device.id, dev_mac: device.dev_mac } }
      }),
    )
    console.log(`new key for device ${rotated.device.id} (${rotated.device.dev_mac})`)
    console.log(`device key (shown only now): ${key}`)
    return 0
  },
}

const iso = (ms: number) => new Date(ms).toISOString()

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
    if (values.json) {
      for (const d of devices) console.log(JSON.stringify(d))
      return 0
    }
    if (devices.length === 0) {
      console.log(eventId === undefined ? 'no devices' : `no devices at event ${eventId}`)
      return 0
    }
    const rows = [
      ['ID', 'MAC', 'EVENT', 'OPERATOR', 'KEY', 'ARCHIVED', 'CREATED'],
      ...devices.map((d) => [
        String(d.id),
        d.dev_mac,
        String(d.event_id),
        d.operator_id === null ? '-' : String(d.operator_id),
        d.has_key ? 'yes' : 'no',
        d.archived ? 'yes' : 'no',
        iso(d.created_at),
      ]),
    ]
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
    for (const r of rows) console.log(r.map((c, i) => c.padEnd(widths[i]!)).join('  '))
    return 0
  },
}

export const deviceCommands: CommandGroup = {
  name: 'device',
  summary: 'Devices and their device keys on the configured database.',
  subcommands: { create, 'rotate-key': rotateKey, list },
}
