import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, type TestApp, verifyToken, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import type { SeedDocument } from '../seed/seed.js'

const SEED: SeedDocument = withStandardSeed({
  devices: [
    { dev_mac: 'AA:BB:CC:DD:EE:02', event_id: 1, operator_email: null },
    { dev_mac: 'AA:BB:CC:DD:EE:03', event_id: 1, operator_email: 'op@example.com', archived: true },
    { dev_mac: 'AA:BB:CC:DD:EE:04', event_id: 2, operator_email: null },
    // Associated with an operator who has since moved to event 2.
    { dev_mac: 'AA:BB:CC:DD:EE:05', event_id: 1, operator_email: 'op2@example.com' },
    { dev_mac: 'AA:BB:CC:DD:EE:06', event_id: 1, operator_email: null },
  ],
})

forEachBackend(httpBackends, 'devices', (ctx) => {
  let t: TestApp
  let ids: Record<string, number>
  let operators: Record<string, number>
  before(async () => {
    t = ctx()
    const seeded = await t.seed(SEED)
    ids = Object.fromEntries(seeded.devices!.map((d) => [d.dev_mac.slice(-2), d.id!]))
    operators = Object.fromEntries(seeded.operators!.map((o) => [o.email, o.id!]))
  })

  const deviceAuth = (dev_mac: string, event_id: number) =>
    t.request({ method: 'POST', url: '/devices/auth', payload: { dev_mac, event_id } })
  const deviceLogin = (dev_mac: string, event_id: number, headers: Record<string, string> = {}) =>
    t.request({ method: 'POST', url: '/auth/login/device', payload: { dev_mac, event_id }, headers })
  const deviceToken = (
    deviceId: number | string,
    payload: Record<string, unknown>,
    token?: string,
    headers: Record<string, string> = {},
  ) =>
    t.request({
      method: 'POST',
      url: `/devices/${deviceId}/token`,
      payload,
      headers,
      ...(token ? { token } : {}),
    })

  test('POST /devices/auth answers the device of that event', async () => {
    const res = await deviceAuth('AA:BB:CC:DD:EE:01', 1)
    assert.equal(res.statusCode, 200)
    assert.deepEqual(res.json(), {
      id: ids['01'],
      dev_mac: 'AA:BB:CC:DD:EE:01',
      event_id: 1,
      operator_id: operators['op@example.com'],
      event: { uid: 'summer-fest-2026', name: 'Summer Fest', timezone: 'Europe/Berlin' },
    })
  })

  test('POST /devices/auth: unknown device, other event or archived device is 404', async () => {
    for (const [mac, event] of [
      ['FF:FF:FF:FF:FF:FF', 1],
      ['AA:BB:CC:DD:EE:01', 2],
      ['AA:BB:CC:DD:EE:03', 1],
      ['AA:BB:CC:DD:EE:01', 999],
    ] as const) {
      const res = await deviceAuth(mac, event)
      assert.equal(res.statusCode, 404, `${mac} @ ${event}`)
      assert.equal(typeof res.json().detail, 'string')
    }
  })

  test('POST /devices/auth validates its body', async () => {
    const empty = await deviceAuth('', 1)
    assert.equal(empty.json().detail[0].type, 'string_too_short')
    const long = await deviceAuth('x'.repeat(65), 1)
    assert.equal(long.json().detail[0].type, 'string_too_long')
    const str = await t.request({
      method: 'POST',
      url: '/devices/auth',
      payload: { dev_mac: 'AA:BB:CC:DD:EE:01', event_id: '1' },
    })
    assert.equal(str.statusCode, 422)
    assert.equal(str.json().detail[0].type, 'int_parsing')
  })

  test('POST /auth/login/device issues a 72-hour offline token acting as the operator with device scopes (a key-less device: no sync:*)', async () => {
    const res = await deviceLogin('AA:BB:CC:DD:EE:01', 1)
    assert.equal(res.statusCode, 200)
    const body = res.json()
    assert.equal(body.token_type, 'bearer')
    const { valid, claims } = await verifyToken(t, body.offline_token)
    assert.equal(valid, true)
    assert.equal(claims.type, 'offline')
    assert.equal(claims.role, 'operator')
    assert.equal(claims.sub, String(operators['op@example.com']))
    // A device without a key holds no sync:* (with its key: src/security/keyless-device-sync.test.ts).
    assert.deepEqual(claims.permissions, { '1': ['pos:sell', 'pos:refund'] })
    assert.equal(claims.device_keyless, true)
    assert.deepEqual(claims.event_ids, [1])
    assert.equal(claims.device_id, ids['01'])
    assert.equal(claims.event_id, 1)
    assert.equal(claims.exp - claims.iat, 72 * 3600)
    assert.equal(Date.parse(body.expires_at), claims.exp * 1000)
  })

  test('POST /auth/login/device: no associated operator (or one of another event) is 403', async () => {
    assert.equal((await deviceLogin('AA:BB:CC:DD:EE:02', 1)).statusCode, 403)
    assert.equal((await deviceLogin('AA:BB:CC:DD:EE:05', 1)).statusCode, 403)
  })

  test('POST /auth/login/device: unknown or archived device is 404', async () => {
    assert.equal((await deviceLogin('AA:BB:CC:DD:EE:03', 1)).statusCode, 404)
    assert.equal((await deviceLogin('00:00:00:00:00:00', 1)).statusCode, 404)
  })

  test('POST /devices/{id}/token by an administrator associates the operator and issues the device token', async () => {
    const admin = await login(t, 'ev1@example.com')
    const res = await deviceToken(
      ids['02']!,
      { operator_id: operators['op@example.com'] },
      admin.access_token,
    )
    assert.equal(res.statusCode, 200)
    assert.equal(res.json().token_type, 'bearer')
    const { claims } = await verifyToken(t, res.json().token)
    assert.equal(claims.sub, String(operators['op@example.com']))
    assert.equal(claims.role, 'operator')
    assert.equal(claims.device_id, ids['02'])
    assert.deepEqual(claims.permissions, { '1': ['pos:sell', 'pos:refund'] }, 'a key-less device: no sync:*')
    // The association now lets the device sign in by itself.
    const signIn = await deviceLogin('AA:BB:CC:DD:EE:02', 1)
    assert.equal(signIn.statusCode, 200)
    assert.equal(
      (await verifyToken(t, signIn.json().offline_token)).claims.sub,
      String(operators['op@example.com']),
    )
  })

  test("an operator of the device's event may associate; a superadmin may anywhere", async () => {
    const op = await login(t, 'op@example.com', 'operator')
    const res = await deviceToken(ids['06']!, { operator_id: operators['op@example.com'] }, op.access_token)
    assert.equal(res.statusCode, 200)
    const root = await login(t, 'root@example.com')
    const other = await deviceToken(
      ids['04']!,
      { operator_id: operators['op2@example.com'] },
      root.access_token,
    )
    assert.equal(other.statusCode, 200)
    assert.equal((await verifyToken(t, other.json().token)).claims.event_id, 2)
  })

  test("callers without the device's event are 403; other roles are 403", async () => {
    const ev1 = await login(t, 'ev1@example.com')
    assert.equal(
      (await deviceToken(ids['04']!, { operator_id: operators['op2@example.com'] }, ev1.access_token))
        .statusCode,
      403,
    )
    const op2 = await login(t, 'op2@example.com', 'operator')
    assert.equal(
      (await deviceToken(ids['01']!, { operator_id: operators['op@example.com'] }, op2.access_token))
        .statusCode,
      403,
    )
    const nm = await login(t, 'nm@example.com', 'network_manager')
    assert.equal(
      (await deviceToken(ids['01']!, { operator_id: operators['op@example.com'] }, nm.access_token))
        .statusCode,
      403,
    )
    const consumer = await t.request({
      method: 'POST',
      url: '/auth/login/customer',
      payload: { phone: '+4915100000001', password: 's3cret-pass' },
    })
    assert.equal(
      (
        await deviceToken(
          ids['01']!,
          { operator_id: operators['op@example.com'] },
          consumer.json().access_token,
        )
      ).statusCode,
      403,
    )
  })

  test('an operator of another event, an unknown operator or device is 404; the association is unchanged', async () => {
    const root = await login(t, 'root@example.com')
    const foreign = await deviceToken(
      ids['01']!,
      { operator_id: operators['op2@example.com'] },
      root.access_token,
    )
    assert.equal(foreign.statusCode, 404)
    assert.equal((await deviceToken(ids['01']!, { operator_id: 99_999 }, root.access_token)).statusCode, 404)
    assert.equal(
      (await deviceToken(99_999, { operator_id: operators['op@example.com'] }, root.access_token)).statusCode,
      404,
    )
    assert.equal(
      (await deviceToken(ids['03']!, { operator_id: operators['op@example.com'] }, root.access_token))
        .statusCode,
      404,
      'archived',
    )
    assert.equal((await deviceAuth('AA:BB:CC:DD:EE:01', 1)).json().operator_id, operators['op@example.com'])
  })

  test('order: 401 before 422 before 403', async () => {
    assert.equal((await deviceToken(ids['01']!, { operator_id: 'x' })).statusCode, 401)
    const ev1 = await login(t, 'ev1@example.com')
    const invalid = await deviceToken(ids['04']!, { operator_id: 'x' }, ev1.access_token)
    assert.equal(invalid.statusCode, 422)
    assert.deepEqual(invalid.json().detail[0].loc, ['body', 'operator_id'])
    const badPath = await deviceToken('abc', { operator_id: 1 }, ev1.access_token)
    assert.equal(badPath.statusCode, 422)
    assert.deepEqual(badPath.json().detail[0].loc, ['path', 'device_id'])
    const device = await t.request({
      method: 'POST',
      url: `/devices/${ids['01']}/token`,
      payload: { operator_id: 1, extra: true },
      token: ev1.access_token,
    })
    assert.equal(device.json().detail[0].type, 'extra_forbidden')
  })

  test('rate limits: device auth and device login 60, device token 30 per minute', async () => {
    const a = { 'x-forwarded-for': '198.51.100.80' }
    const auth = (headers: Record<string, string>) =>
      t.request({ method: 'POST', url: '/devices/auth', payload: { dev_mac: 'none', event_id: 1 }, headers })
    for (let i = 0; i < 60; i++) assert.equal((await auth(a)).statusCode, 404)
    assert.equal((await auth(a)).statusCode, 429)
    const b = { 'x-forwarded-for': '198.51.100.81' }
    for (let i = 0; i < 60; i++) assert.equal((await deviceLogin('none', 1, b)).statusCode, 404)
    assert.equal((await deviceLogin('none', 1, b)).statusCode, 429)
    const c = { 'x-forwarded-for': '198.51.100.82' }
    for (let i = 0; i < 30; i++) assert.equal((await deviceToken(1, {}, undefined, c)).statusCode, 401)
    assert.equal((await deviceToken(1, {}, undefined, c)).statusCode, 429)
  })
})
