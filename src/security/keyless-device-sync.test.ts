import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { eventAdmin, forEachBackend, login, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { dashboardSession, formToken } from '../../test/helpers/dashboard.js'
import { newTicketType, newTransfer, type PartnerKeys, seedPartner } from '../../test/helpers/partner.js'

/**
 * Third audit (docs/security.md), "A key-less device still syncs": where DEVICE_KEYS_REQUIRED=false (the test default), a
 * device signed in with its MAC alone got `sync:*`, downloaded every code of the event and could upload
 * scans. Such a device now holds no `sync:*` scope and both are refused 403 `device_key_required`; a
 * device with a key syncs as before. And "a device can be revoked only on the server's command line":
 * POST /devices/{device_id}/revoke does what `wristband device revoke` does, audited.
 */
const KEYLESS_MAC = 'AA:BB:CC:DD:EE:01' // STANDARD_SEED's device 1, without a key
const KEYED_MAC = 'AA:BB:CC:DD:EE:20'
const KEY = 'wbd_keyless-test-device-key-0123456'

forEachBackend(httpBackends, 'key-less devices and device revoke through the admin API', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  let ticketType: string
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
    ticketType = await newTicketType(t, keys.write)
    await t.seed({
      devices: [{ dev_mac: KEYED_MAC, event_id: 1, operator_email: 'op@example.com', device_key: KEY }],
      administrators: [eventAdmin('ev2-devices@example.com', [2])],
    })
  })

  async function deviceLogin(dev_mac: string, device_key?: string): Promise<string> {
    const res = await t.request({
      method: 'POST',
      url: '/auth/login/device',
      payload: { dev_mac, event_id: 1, ...(device_key ? { device_key } : {}) },
    })
    assert.equal(res.statusCode, 200, res.body)
    return res.json().offline_token
  }
  const feed = (token: string) => t.request({ method: 'GET', url: '/events/1/scan-sync', token })
  const upload = async (token: string) => {
    const { transfer_uid } = await newTransfer(t, keys.write, ticketType)
    return t.request({
      method: 'POST',
      url: '/tickets/use-batch',
      token,
      payload: { scans: [{ transfer_uid, used_at: new Date(t.clock.now()).toISOString() }] },
    })
  }
  const claimsOf = async (token: string) =>
    (await t.request({ method: 'POST', url: '/tokens/verify', payload: { token } })).json().claims

  test('a key-less device still syncs: it holds no sync:* and its download and uploads are refused 403 device_key_required', async () => {
    const token = await deviceLogin(KEYLESS_MAC)
    const claims = await claimsOf(token)
    assert.deepEqual(claims.permissions, { '1': ['pos:sell', 'pos:refund'] })
    assert.equal(claims.device_keyless, true)
    for (const res of [await feed(token), await upload(token)]) {
      assert.equal(res.statusCode, 403, res.body)
      assert.equal(res.json().error, 'device_key_required')
    }
    // The token an administrator issues for the key-less device is no different.
    const admin = (await login(t, 'ev1@example.com')).access_token
    const issued = await t.request({
      method: 'POST',
      url: '/devices/1/token',
      token: admin,
      payload: { operator_id: 1 },
    })
    assert.equal(issued.statusCode, 200, issued.body)
    assert.deepEqual((await claimsOf(issued.json().token)).permissions, { '1': ['pos:sell', 'pos:refund'] })
    assert.equal((await feed(issued.json().token)).json().error, 'device_key_required')
  })

  test('a device with its key syncs and uploads', async () => {
    const token = await deviceLogin(KEYED_MAC, KEY)
    const claims = await claimsOf(token)
    assert.deepEqual(claims.permissions, { '1': ['pos:sell', 'pos:refund', 'sync:upload', 'sync:download'] })
    assert.equal(claims.device_keyless, undefined)
    assert.equal((await feed(token)).statusCode, 200)
    const res = await upload(token)
    assert.equal(res.statusCode, 200, res.body)
    assert.equal(res.json().results[0].status, 'USED')
  })

  test('a device can be revoked only on the command line: POST /devices/{id}/revoke ends its tokens, audited', async () => {
    const keyedId = (
      await t.db.db
        .selectFrom('devices')
        .select('id')
        .where('dev_mac', '=', KEYED_MAC)
        .executeTakeFirstOrThrow()
    ).id
    const token = await deviceLogin(KEYED_MAC, KEY)
    assert.equal((await feed(token)).statusCode, 200)
    const admin = (await login(t, 'ev1@example.com')).access_token
    const revoke = (id: number | string, by: string, query = '') =>
      t.request({ method: 'POST', url: `/devices/${id}/revoke${query}`, token: by })

    // Not the caller's event: 403; no such device: 404; not an administrator: 403; no token: 401.
    const other = (await login(t, 'ev2-devices@example.com')).access_token
    assert.equal((await revoke(keyedId, other)).statusCode, 403)
    assert.equal((await revoke(99_999, admin)).statusCode, 404)
    const operator = (await login(t, 'op@example.com', 'operator')).access_token
    assert.equal((await revoke(keyedId, operator)).statusCode, 403)
    assert.equal((await t.request({ method: 'POST', url: `/devices/${keyedId}/revoke` })).statusCode, 401)
    assert.equal((await revoke(keyedId, admin, '?archive=yes')).statusCode, 422)
    assert.equal((await feed(token)).statusCode, 200, 'refused attempts changed nothing')

    const res = await revoke(keyedId, admin)
    assert.equal(res.statusCode, 200, res.body)
    assert.deepEqual(res.json(), { device_id: keyedId, archived: false, tokens_revoked: true })
    assert.equal((await feed(token)).statusCode, 401)
    assert.equal(await claimsOf(token), null)
    const audit = await t.db.db
      .selectFrom('audit_log')
      .select(['actor', 'detail', 'outcome'])
      .where('kind', '=', 'device_revoke')
      .execute()
    assert.equal(audit.length, 1)
    assert.equal(audit[0]!.outcome, 'success')
    assert.match(audit[0]!.actor ?? '', /^admin:\d+$/)
    assert.equal(JSON.parse(audit[0]!.detail!).device_id, keyedId)

    // Not archived: it signs in again with its key; archived, it cannot.
    const again = await deviceLogin(KEYED_MAC, KEY)
    assert.equal((await feed(again)).statusCode, 200)
    const archived = await revoke(keyedId, admin, '?archive=true')
    assert.deepEqual(archived.json(), { device_id: keyedId, archived: true, tokens_revoked: true })
    assert.equal((await feed(again)).statusCode, 401)
    const refused = await t.request({
      method: 'POST',
      url: '/auth/login/device',
      payload: { dev_mac: KEYED_MAC, event_id: 1, device_key: KEY },
    })
    assert.equal(refused.statusCode, 404)
  })

  test("a device can be revoked only on the command line: the dashboard's devices page ends its tokens, audited", async () => {
    const mac = 'AA:BB:CC:DD:EE:21'
    await t.seed({
      devices: [{ dev_mac: mac, event_id: 1, operator_email: 'op@example.com', device_key: KEY }],
    })
    const id = (
      await t.db.db.selectFrom('devices').select('id').where('dev_mac', '=', mac).executeTakeFirstOrThrow()
    ).id
    const token = await deviceLogin(mac, KEY)
    const admin = await dashboardSession(t, 'ev1@example.com')
    const page = await t.request({
      method: 'GET',
      url: '/dashboard/events/1/devices',
      cookies: { wb_session: admin },
    })
    assert.equal(page.statusCode, 200, page.body)
    assert.match(page.body, new RegExp(`data-device="${id}"`))
    assert.match(page.body, new RegExp(mac))
    // The event's page links to it for administrators.
    const eventPage = await t.request({
      method: 'GET',
      url: '/dashboard/events/1',
      cookies: { wb_session: admin },
    })
    assert.match(eventPage.body, /href="\/dashboard\/events\/1\/devices"/)
    const post = (session: string, csrf: string, extra: Record<string, string> = {}, eventId = 1) =>
      t.request({
        method: 'POST',
        url: `/dashboard/events/${eventId}/devices/${id}/revoke`,
        cookies: { wb_session: session },
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ csrf_token: csrf, ...extra }).toString(),
      })
    // A wrong CSRF token, another event's path, a dashboard user: refused, nothing ended.
    assert.equal((await post(admin, 'wrong')).statusCode, 403)
    const root = await dashboardSession(t, 'root@example.com')
    const rootCsrf = formToken(
      (await t.request({ method: 'GET', url: '/dashboard/events/2/devices', cookies: { wb_session: root } }))
        .body,
    )
    assert.equal((await post(root, rootCsrf, {}, 2)).statusCode, 403, "the device is not event 2's")
    const user = await dashboardSession(t, 'partner1')
    const userPage = await t.request({
      method: 'GET',
      url: '/dashboard/events/1/devices',
      cookies: { wb_session: user },
    })
    assert.equal(userPage.statusCode, 403)
    assert.equal((await feed(token)).statusCode, 200, 'refused attempts changed nothing')

    const done = await post(admin, formToken(page.body), { archive: '1' })
    assert.equal(done.statusCode, 303, done.body)
    assert.equal(done.headers.location, `/dashboard/events/1/devices?revoked=${id}&archived=1`)
    assert.equal((await feed(token)).statusCode, 401)
    const after = await t.request({
      method: 'GET',
      url: String(done.headers.location),
      cookies: { wb_session: admin },
    })
    assert.match(after.body, /are revoked and the device is archived/)
    const audit = await t.db.db
      .selectFrom('audit_log')
      .select(['actor', 'detail'])
      .where('kind', '=', 'device_revoke')
      .orderBy('id', 'desc')
      .executeTakeFirstOrThrow()
    assert.match(audit.actor ?? '', /^admin:\d+$/)
    assert.deepEqual(JSON.parse(audit.detail!), { device_id: id, dev_mac: mac, archived: true })
  })
})

test('STANDARD_SEED device 1 is the key-less device this suite names', () => {
  assert.equal(STANDARD_SEED.devices?.[0]?.dev_mac, KEYLESS_MAC)
})
