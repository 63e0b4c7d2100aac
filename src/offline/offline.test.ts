import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, STANDARD_SEED, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { assertPerMinuteLimit } from '../../test/helpers/rate-limit.js'

forEachBackend(httpBackends, 'POST /tokens/offline', (ctx) => {
  let t: TestApp
  let root: string
  let ev1: string
  let op: string
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    root = (await login(t, 'root@example.com')).access_token
    ev1 = (await login(t, 'ev1@example.com')).access_token
    op = (await login(t, 'op@example.com', 'operator')).access_token
  })

  const offline = (token: string | undefined, payload: object) =>
    t.request({ method: 'POST', url: '/tokens/offline', payload, ...(token ? { token } : {}) })
  const claimsOf = async (token: string) => {
    const verified = await verifyToken(t, token)
    assert.equal(verified.valid, true)
    return verified.claims
  }

  test('an operator of the event gets an offline token bound to the event and device, 72 hours', async () => {
    const device = await t.db.db
      .selectFrom('devices')
      .select(['id', 'token_generation'])
      .where('event_id', '=', 1)
      .executeTakeFirstOrThrow()
    const res = await offline(op, { event_id: 1, device_id: String(device.id) })
    assert.equal(res.statusCode, 200, res.body)
    assert.equal(res.headers['cache-control'], 'no-store')
    const body = res.json()
    assert.deepEqual(Object.keys(body).sort(), ['event_id', 'expires_at', 'offline_token'])
    assert.equal(body.event_id, 1)
    const claims = await claimsOf(body.offline_token)
    assert.equal(claims.type, 'offline')
    assert.equal(claims.role, 'operator')
    assert.equal(claims.event_id, 1)
    assert.equal(claims.device_id, String(device.id))
    assert.equal(claims.device_gen, device.token_generation)
    assert.deepEqual(claims.event_ids, [1])
    assert.deepEqual(claims.permissions, { '1': ['pos:sell', 'ticket:scan'] })
    assert.equal(claims.exp - claims.iat, 72 * 3600)
    assert.equal(body.expires_at, new Date(claims.exp * 1000).toISOString())
    assert.equal(claims.mfa_verified_at, undefined)
  })

  test('administrators: their own events; a superadmin any event, with the grant narrowed to it', async () => {
    const own = await offline(ev1, { event_id: 1 })
    assert.equal(own.statusCode, 200)
    const ownClaims = await claimsOf(own.json().offline_token)
    assert.equal(ownClaims.role, 'admin')
    assert.equal(ownClaims.device_id, undefined)
    assert.ok(ownClaims.permissions['1'].includes('events:manage'))

    const res = await offline(root, { event_id: 2, device_id: null })
    assert.equal(res.statusCode, 200)
    const claims = await claimsOf(res.json().offline_token)
    assert.deepEqual(claims.event_ids, [2])
    assert.deepEqual(Object.keys(claims.permissions), ['2'])
    assert.ok(claims.permissions['2'].includes('billing:manage'))
  })

  test('an offline token is not an access token: protected routes refuse it', async () => {
    const token = (await offline(ev1, { event_id: 1 })).json().offline_token
    const res = await t.request({ method: 'GET', url: '/admin/me', token })
    assert.equal(res.statusCode, 401)
  })

  test('403 without access to the event or with another role; 404 for an unknown event; 401 without a token', async () => {
    assert.equal((await offline(op, { event_id: 2 })).statusCode, 403)
    assert.equal((await offline(ev1, { event_id: 2 })).statusCode, 403)
    const nm = (await login(t, 'nm@example.com', 'network_manager')).access_token
    assert.equal((await offline(nm, { event_id: 1 })).statusCode, 403)
    assert.equal((await offline(root, { event_id: 99 })).statusCode, 404)
    assert.equal((await offline(undefined, { event_id: 1 })).statusCode, 401)
  })

  test('claims come from the stored record: a permission removed since sign-in is not carried', async () => {
    const before = (await login(t, 'op@example.com', 'operator')).access_token
    await t.db.db
      .updateTable('users')
      .set({ permissions: JSON.stringify({ '1': ['ticket:scan'] }) })
      .where('email', '=', 'op@example.com')
      .execute()
    const res = await offline(before, { event_id: 1 })
    assert.equal(res.statusCode, 200)
    assert.deepEqual((await claimsOf(res.json().offline_token)).permissions, { '1': ['ticket:scan'] })
  })

  test('validation: event_id an integer, device_id a string or null, nothing else', async () => {
    for (const payload of [{}, { event_id: 'one' }, { event_id: 1, device_id: 7 }, { event_id: 1, x: 1 }]) {
      const res = await offline(ev1, payload)
      assert.equal(res.statusCode, 422, JSON.stringify(payload))
    }
  })

  test('rate limit: 30 per minute per address', async () => {
    await assertPerMinuteLimit(t, 30, () => ({
      method: 'POST',
      url: '/tokens/offline',
      token: ev1,
      payload: { event_id: 1 },
    }))
  })
})
