import assert from 'node:assert/strict'
import { generateKeyPairSync } from 'node:crypto'
import { after, before, test } from 'node:test'
import { forEachBackend, login, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { ok, startAppWithCli, wristband } from '../../test/helpers/cli.js'
import { newTicketType, newTransfer, type PartnerKeys, seedPartner } from '../../test/helpers/partner.js'
import { loadConfig } from '../platform/config.js'
import type { SeedDocument } from '../seed/seed.js'

/**
 * A device login needs only a MAC and an event id (the specification's design), and its offline token
 * can upload scans. Device keys close the first where they are provisioned (or everywhere with
 * DEVICE_KEYS_REQUIRED=true), and the used_at window keeps any offline token from rewriting history.
 */
const KEYED_MAC = 'AA:BB:CC:DD:EE:10'
const KEY = 'wbd_seeded-device-key-0123456789'
const KEYLESS_MAC = 'AA:BB:CC:DD:EE:01' // STANDARD_SEED's device, without a key
const OFFLINE_HOURS = 72

const withKeyedDevice = (extra: Record<string, unknown> = {}): SeedDocument =>
  ({
    devices: [
      { dev_mac: KEYED_MAC, event_id: 1, operator_email: 'op@example.com', device_key: KEY, ...extra },
    ],
  }) as SeedDocument

const ROUTES = ['/devices/auth', '/auth/login/device'] as const

function deviceRequest(t: TestApp, url: string, dev_mac: string, device_key?: string) {
  return t.request({
    method: 'POST',
    url,
    payload: { dev_mac, event_id: 1, ...(device_key === undefined ? {} : { device_key }) },
  })
}

forEachBackend(httpBackends, 'device keys (DEVICE_KEYS_REQUIRED=false, the default)', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    await t.seed(withKeyedDevice())
  })

  test('a device with a key: both device routes refuse a missing or wrong key with 401', async () => {
    for (const url of ROUTES) {
      for (const key of [undefined, 'wbd_wrong-key-0123456789abcdef', `${KEY}x`, KEY.slice(0, -1)]) {
        const res = await deviceRequest(t, url, KEYED_MAC, key)
        assert.equal(res.statusCode, 401, `${url} with ${key}: ${res.body}`)
        assert.equal(typeof res.json().detail, 'string')
        assert.equal(res.json().offline_token, undefined)
      }
      const ok = await deviceRequest(t, url, KEYED_MAC, KEY)
      assert.equal(ok.statusCode, 200, `${url}: ${ok.body}`)
    }
  })

  test('dev_mac is compared case-insensitively: the device signs in with its MAC in either case, and the seed and CLI find it so', async () => {
    for (const url of ROUTES) {
      assert.equal((await deviceRequest(t, url, KEYED_MAC.toLowerCase(), KEY)).statusCode, 200, url)
      assert.equal((await deviceRequest(t, url, KEYLESS_MAC.toLowerCase())).statusCode, 200, url)
      assert.equal((await deviceRequest(t, url, KEYED_MAC.toLowerCase())).statusCode, 401, url)
    }
    // The seed matches the existing device rather than adding a second one.
    await t.seed({
      devices: [{ dev_mac: KEYLESS_MAC.toLowerCase(), event_id: 1, operator_email: 'op@example.com' }],
    })
    const rows = await t.db.db.selectFrom('devices').select('dev_mac').execute()
    assert.equal(rows.filter((r) => r.dev_mac.toLowerCase() === KEYLESS_MAC.toLowerCase()).length, 1)
  })

  test('the key is stored only as its SHA-256', async () => {
    const rows = await t.db.db.selectFrom('devices').selectAll().where('dev_mac', '=', KEYED_MAC).execute()
    assert.equal(rows.length, 1)
    assert.match(rows[0]!.key_hash ?? '', /^[0-9a-f]{64}$/)
    assert.ok(!JSON.stringify(rows).includes(KEY.slice(4)))
  })

  test('a key-less device still signs in with its MAC and event id alone (the specification)', async () => {
    for (const url of ROUTES) assert.equal((await deviceRequest(t, url, KEYLESS_MAC)).statusCode, 200, url)
  })

  test('a failed key check is audited without the key', async () => {
    await deviceRequest(t, '/auth/login/device', KEYED_MAC, 'wbd_audited-wrong-key-0123456')
    const rows = await t.db.db
      .selectFrom('audit_log')
      .selectAll()
      .where('kind', '=', 'device_key')
      .where('outcome', '=', 'failure')
      .execute()
    assert.ok(rows.length >= 1)
    assert.ok(!JSON.stringify(rows).includes('audited-wrong-key'))
  })

  test('seed: device_key null removes the key, absent keeps it', async () => {
    await t.seed({ devices: [{ dev_mac: KEYED_MAC, event_id: 1, operator_email: 'op@example.com' }] })
    assert.equal((await deviceRequest(t, '/devices/auth', KEYED_MAC)).statusCode, 401)
    await t.seed(withKeyedDevice({ device_key: null }))
    assert.equal((await deviceRequest(t, '/devices/auth', KEYED_MAC)).statusCode, 200)
    await t.seed(withKeyedDevice())
    assert.equal((await deviceRequest(t, '/devices/auth', KEYED_MAC)).statusCode, 401)
  })
})

forEachBackend(
  httpBackends,
  'device keys (DEVICE_KEYS_REQUIRED=true)',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
      await t.seed(withKeyedDevice())
    })

    test('every device needs its key: a key-less device is refused at both routes', async () => {
      for (const url of ROUTES) {
        assert.equal((await deviceRequest(t, url, KEYLESS_MAC)).statusCode, 401, url)
        assert.equal((await deviceRequest(t, url, KEYLESS_MAC, KEY)).statusCode, 401, url)
        assert.equal((await deviceRequest(t, url, KEYED_MAC, KEY)).statusCode, 200, url)
      }
      // An unknown device is still 404, as specified.
      assert.equal((await deviceRequest(t, '/devices/auth', 'AA:BB:CC:DD:EE:99', KEY)).statusCode, 404)
    })
  },
  { DEVICE_KEYS_REQUIRED: 'true' },
)

/** What a production start needs besides the device setting (the edge key, mail in the outbox). */
const PRODUCTION = {
  NODE_ENV: 'production',
  EDGE_SIGNING_KEY: generateKeyPairSync('ed25519')
    .privateKey.export({ format: 'pem', type: 'pkcs8' })
    .toString(),
  MAIL_TRANSPORT: 'outbox',
}

forEachBackend(
  httpBackends,
  'device keys in production (DEVICE_KEYS_REQUIRED unset)',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
      await t.seed(withKeyedDevice())
    })

    test('a key-less device cannot sign in in production', async () => {
      assert.equal(t.config.DEVICE_KEYS_REQUIRED, true)
      for (const url of ROUTES) {
        const res = await deviceRequest(t, url, KEYLESS_MAC)
        assert.equal(res.statusCode, 401, `${url}: ${res.body}`)
        assert.equal(res.json().offline_token, undefined)
        assert.equal((await deviceRequest(t, url, KEYED_MAC, KEY)).statusCode, 200, url)
      }
      assert.ok(!t.logs.some((l) => l.includes('DEVICE_KEYS_REQUIRED=false')))
    })
  },
  PRODUCTION,
)

forEachBackend(
  httpBackends,
  'device keys in production, DEVICE_KEYS_REQUIRED=false',
  (ctx) => {
    test('a production instance told DEVICE_KEYS_REQUIRED=false warns at start, and key-less devices sign in', async () => {
      const t = ctx()
      await t.seed(STANDARD_SEED)
      const warning = t.logs.find((l) => l.includes('DEVICE_KEYS_REQUIRED=false in production'))
      assert.ok(warning, t.logs.join(''))
      assert.equal(JSON.parse(warning).level, 'warn')
      assert.equal((await deviceRequest(t, '/auth/login/device', KEYLESS_MAC)).statusCode, 200)
    })
  },
  { ...PRODUCTION, DEVICE_KEYS_REQUIRED: 'false' },
)

test('DEVICE_KEYS_REQUIRED defaults to true in production only', () => {
  const base = {
    DATABASE_URL: 'postgres://wristband@db.example.com/wristband',
    JWT_SECRET: 'x'.repeat(32),
    EDGE_SIGNING_KEY: PRODUCTION.EDGE_SIGNING_KEY,
    MAIL_TRANSPORT: 'outbox',
  }
  assert.equal(loadConfig({ ...base, NODE_ENV: 'production' }).DEVICE_KEYS_REQUIRED, true)
  assert.equal(loadConfig({ ...base, NODE_ENV: 'development' }).DEVICE_KEYS_REQUIRED, false)
  assert.equal(
    loadConfig({ ...base, NODE_ENV: 'production', DEVICE_KEYS_REQUIRED: 'false' }).DEVICE_KEYS_REQUIRED,
    false,
  )
  assert.equal(loadConfig({ ...base, DEVICE_KEYS_REQUIRED: 'true' }).DEVICE_KEYS_REQUIRED, true)
})

forEachBackend(httpBackends, 'offline scans: used_at window', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  let ticketUid: string
  let offline: string
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
    ticketUid = await newTicketType(t, keys.write)
    // A device with its key: a key-less one uploads no scans at all (src/security/keyless-device-sync.test.ts).
    await t.seed(withKeyedDevice())
    const res = await deviceRequest(t, '/auth/login/device', KEYED_MAC, KEY)
    assert.equal(res.statusCode, 200, res.body)
    offline = res.json().offline_token
  })

  async function upload(token: string, scans: { transfer_uid: string; used_at: string }[]) {
    const res = await t.request({ method: 'POST', url: '/tickets/use-batch', token, payload: { scans } })
    assert.equal(res.statusCode, 200, res.body)
    return res.json().results as { status: string; used_at?: string; clock_adjusted?: true }[]
  }
  const transferRow = (uid: string) =>
    t.db.db
      .selectFrom('transfers')
      .select(['status', 'used_at', 'used_clock_adjusted'])
      .where('uid', '=', uid)
      .executeTakeFirstOrThrow()

  test('an offline token cannot backdate a use to 2020 or date it ahead: recorded now, clock_adjusted, the claimed time audited', async (test) => {
    t.clock.freeze()
    test.after(() => t.clock.thaw())
    const now = t.clock.now()
    const hour = 3_600_000
    const outside = [
      '2020-01-01T12:00:00Z',
      new Date(now - OFFLINE_HOURS * hour - 60_000).toISOString(),
      new Date(now + 6 * 60_000).toISOString(),
      '2099-01-01T00:00:00Z',
    ]
    const victims = await Promise.all(outside.map(() => newTransfer(t, keys.write, ticketUid)))
    const scans = victims.map((v, i) => ({ transfer_uid: v.transfer_uid, used_at: outside[i]! }))
    const results = await upload(offline, scans)
    for (const r of results) {
      assert.equal(r.status, 'USED')
      assert.equal(r.clock_adjusted, true)
      assert.equal(r.used_at, new Date(now).toISOString())
    }
    for (const v of victims)
      assert.deepEqual(await transferRow(v.transfer_uid), {
        status: 'USED',
        used_at: now,
        used_clock_adjusted: 1,
      })
    const audit = await t.db.db
      .selectFrom('audit_log')
      .select(['detail'])
      .where('kind', '=', 'ticket_use_clock_adjusted')
      .execute()
    const claimed = audit.map((a) => JSON.parse(a.detail!).claimed_used_at).sort()
    assert.deepEqual(claimed, [...outside].sort())
    // The same holds for a staff access token with ticket:scan; a later scan is ALREADY_USED, still flagged.
    const staff = (await login(t, 'op@example.com', 'operator')).access_token
    const again = await upload(staff, scans.slice(0, 1))
    assert.deepEqual(
      again.map((r) => [r.status, r.clock_adjusted]),
      [['ALREADY_USED', true]],
    )
    // Inside the window the device's time is kept.
    const inside = [
      new Date(now - (OFFLINE_HOURS - 1) * hour).toISOString(),
      new Date(now + 4 * 60_000).toISOString(),
      new Date(now - 60_000).toISOString(),
    ]
    // Transferred before the earliest of those times: a scan is never kept from before its ticket existed.
    t.clock.advance(-OFFLINE_HOURS * hour)
    const fresh = await Promise.all(inside.map(() => newTransfer(t, keys.write, ticketUid)))
    t.clock.advance(OFFLINE_HOURS * hour)
    const kept = await upload(
      offline,
      fresh.map((v, i) => ({ transfer_uid: v.transfer_uid, used_at: inside[i]! })),
    )
    assert.deepEqual(
      kept.map((r) => [r.status, r.used_at, r.clock_adjusted]),
      inside.map((at) => ['USED', at, undefined]),
    )
  })
})

eachBackend(httpBackends, 'wristband device: create, rotate-key, list', (backend) => {
  let t: TestApp
  let env: Record<string, string>
  const cli = (args: string[]) => wristband(args, env)
  const keyOf = (out: string) => /device key \(shown only now\): (wbd_\S+)/.exec(out)?.[1]

  let close = async () => {}
  before(async () => {
    ;({ t, env, close } = await startAppWithCli(backend))
    await t.seed(STANDARD_SEED)
  })
  after(() => close())

  test('create prints a key once; the device needs it; rotate-key replaces it; list shows no key', async () => {
    const opId = (
      await t.db.db
        .selectFrom('users')
        .select('id')
        .where('email', '=', 'op@example.com')
        .executeTakeFirstOrThrow()
    ).id
    const created = ok(
      await cli(['device', 'create', '--event', '1', '--mac', 'CLI:00:01', '--operator-id', String(opId)]),
    )
    const first = keyOf(created)
    assert.ok(first, created)
    assert.equal((await deviceRequest(t, '/auth/login/device', 'CLI:00:01')).statusCode, 401)
    assert.equal((await deviceRequest(t, '/auth/login/device', 'CLI:00:01', first)).statusCode, 200)

    const rotated = ok(await cli(['device', 'rotate-key', '--mac', 'CLI:00:01']))
    const second = keyOf(rotated)
    assert.ok(second && second !== first, rotated)
    assert.equal((await deviceRequest(t, '/auth/login/device', 'CLI:00:01', first)).statusCode, 401)
    assert.equal((await deviceRequest(t, '/auth/login/device', 'CLI:00:01', second)).statusCode, 200)

    // A key-less device (from the seed) gets its first key the same way.
    const seeded = ok(await cli(['device', 'rotate-key', '--mac', KEYLESS_MAC]))
    assert.equal((await deviceRequest(t, '/devices/auth', KEYLESS_MAC)).statusCode, 401)
    assert.equal((await deviceRequest(t, '/devices/auth', KEYLESS_MAC, keyOf(seeded))).statusCode, 200)

    const listed = ok(await cli(['device', 'list', '--event', '1', '--json']))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { dev_mac: string; has_key: boolean })
    assert.deepEqual(
      listed.map((d) => [d.dev_mac, d.has_key]).sort(),
      [
        [KEYLESS_MAC, true],
        ['CLI:00:01', true],
      ].sort(),
    )
    const table = ok(await cli(['device', 'list']))
    assert.match(table, /CLI:00:01/)
    for (const k of [first, second, keyOf(seeded)!]) {
      assert.ok(!table.includes(k))
      assert.ok(!listed.some((d) => JSON.stringify(d).includes(k)))
    }
    const audit = await t.db.db
      .selectFrom('audit_log')
      .select(['kind', 'detail'])
      .where('kind', 'like', 'cli_device_%')
      .execute()
    assert.deepEqual([...new Set(audit.map((a) => a.kind))].sort(), [
      'cli_device_create',
      'cli_device_list',
      'cli_device_rotate_key',
    ])
    assert.ok(!JSON.stringify(audit).includes('wbd_'))
  })

  test('bad input: exit 2 with a clear message; a duplicate MAC or unknown event: exit 1', async () => {
    const bad = await cli(['device', 'rotate-key'])
    assert.equal(bad.code, 2)
    assert.match(bad.stderr, /give either --id or --mac/)
    const dup = await cli(['device', 'create', '--event', '1', '--mac', KEYLESS_MAC])
    assert.equal(dup.code, 1)
    assert.match(dup.stderr, /rotate-key/)
    const noEvent = await cli(['device', 'create', '--event', '999', '--mac', 'CLI:00:02'])
    assert.equal(noEvent.code, 1)
    assert.match(noEvent.stderr, /no event with id 999/)
    assert.match(ok(await cli(['device', '--help'])), /rotate-key/)
  })
})
