import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, STANDARD_SEED, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { assertPerMinuteLimit } from '../../test/helpers/rate-limit.js'
import { sha256Hex } from '../platform/digest.js'

forEachBackend(httpBackends, 'event API keys', (ctx) => {
  let t: TestApp
  let root: string
  let ev1: string
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    root = (await login(t, 'root@example.com')).access_token
    ev1 = (await login(t, 'ev1@example.com')).access_token
  })

  const create = (token: string | undefined, payload: object) =>
    t.request({ method: 'POST', url: '/tokens/api-key', payload, ...(token ? { token } : {}) })
  const list = (token: string, eventId: number | string) =>
    t.request({ method: 'GET', url: `/tokens/api-keys?event_id=${eventId}`, token })
  const revoke = (token: string, id: number | string) =>
    t.request({ method: 'DELETE', url: `/tokens/api-key/${id}`, token })

  test('an administrator of the event creates a key: wb_ plaintext once, only its SHA-256 stored', async () => {
    const res = await create(ev1, { event_id: 1, name: 'Box office', scopes: ['api:read'] })
    assert.equal(res.statusCode, 200, res.body)
    assert.equal(res.headers['cache-control'], 'no-store')
    const key = res.json()
    assert.match(key.api_key, /^wb_[A-Za-z0-9_-]{43}$/)
    assert.equal(key.name, 'Box office')
    assert.equal(key.event_id, 1)
    assert.deepEqual(key.scopes, ['api:read'])
    assert.ok(Number.isInteger(key.id))
    assert.ok(Math.abs(Date.parse(key.created_at) - t.clock.now()) < 60_000)
    const row = await t.db.db
      .selectFrom('event_clients')
      .selectAll()
      .where('id', '=', key.id)
      .executeTakeFirstOrThrow()
    assert.equal(row.token_hash, sha256Hex(key.api_key))
    assert.ok(!JSON.stringify(row).includes(key.api_key.slice(3)), 'plaintext stored')
  })

  test('POST /tokens/verify answers for a live key with event_client claims for its event', async () => {
    const key = (
      await create(root, { event_id: 2, name: 'Partner', scopes: ['api:read', 'api:write'] })
    ).json()
    const { valid, claims } = await verifyToken(t, key.api_key)
    assert.equal(valid, true)
    assert.equal(claims.type, 'api_key')
    assert.equal(claims.role, 'event_client')
    assert.deepEqual(claims.event_ids, [2])
    assert.deepEqual(claims.permissions, { '2': ['api:read', 'api:write'] })
  })

  test('only administrators who reach the event: 403 for another event, an operator, a network manager', async () => {
    const body = { event_id: 2, name: 'x', scopes: ['api:read'] }
    assert.equal((await create(ev1, body)).statusCode, 403)
    const op = (await login(t, 'op@example.com', 'operator')).access_token
    assert.equal((await create(op, { ...body, event_id: 1 })).statusCode, 403)
    const nm = (await login(t, 'nm@example.com', 'network_manager')).access_token
    assert.equal((await create(nm, { ...body, event_id: 1 })).statusCode, 403)
    const none = await create(undefined, body)
    assert.equal(none.statusCode, 401)
  })

  test('an event that does not exist: 404 for a superadmin, 403 for an administrator of other events', async () => {
    const body = { event_id: 99, name: 'x', scopes: ['api:read'] }
    assert.equal((await create(root, body)).statusCode, 404)
    assert.equal((await create(ev1, body)).statusCode, 403)
  })

  test('scopes are a non-empty subset of api:read, api:write; name 1 to 100 characters', async () => {
    const bad: [object, string][] = [
      [{ event_id: 1, name: 'x', scopes: [] }, 'too_short'],
      [{ event_id: 1, name: 'x', scopes: ['events:manage'] }, 'literal_error'],
      [{ event_id: 1, name: 'x', scopes: ['api:read', 'api:read'] }, 'value_error'],
      [{ event_id: 1, name: '', scopes: ['api:read'] }, 'string_too_short'],
      [{ event_id: 1, name: 'n'.repeat(101), scopes: ['api:read'] }, 'string_too_long'],
      [{ event_id: '1', name: 'x', scopes: ['api:read'] }, 'int_parsing'],
      [{ name: 'x', scopes: ['api:read'] }, 'missing'],
      [{ event_id: 1, name: 'x', scopes: ['api:read'], role: 'admin' }, 'extra_forbidden'],
    ]
    for (const [payload, type] of bad) {
      const res = await create(root, payload)
      assert.equal(res.statusCode, 422, JSON.stringify(payload))
      assert.equal(res.json().detail[0].type, type, JSON.stringify(payload))
    }
    assert.equal((await create(undefined, { scopes: 'nope' })).statusCode, 401, '401 comes before 422')
  })

  test('the list shows prefix, name, scopes, created and last used, never a secret', async () => {
    const key = (await create(ev1, { event_id: 1, name: 'Scanner', scopes: ['api:write'] })).json()
    const res = await list(ev1, 1)
    assert.equal(res.statusCode, 200)
    assert.ok(!res.body.includes(key.api_key), 'plaintext in the listing')
    const item = res.json().find((k: { id: number }) => k.id === key.id)
    assert.deepEqual(item, {
      id: key.id,
      name: 'Scanner',
      prefix: key.api_key.slice(0, 10),
      event_id: 1,
      partner: `Scanner (key #${key.id})`,
      scopes: ['api:write'],
      created_at: key.created_at,
      last_used_at: null,
      revoked_at: null,
    })
    for (const k of res.json()) assert.equal(k.event_id, 1)
    assert.equal((await list(ev1, 2)).statusCode, 403)
    assert.equal((await list(root, 99)).statusCode, 404)
    const missing = await t.request({ method: 'GET', url: '/tokens/api-keys', token: ev1 })
    assert.equal(missing.statusCode, 422)
    assert.deepEqual(missing.json().detail[0].loc, ['query', 'event_id'])
  })

  test('revoking: 403 for a key of an event out of reach, 404 for an unknown key, then invalid at once', async () => {
    const other = (await create(root, { event_id: 2, name: 'Other', scopes: ['api:read'] })).json()
    assert.equal((await revoke(ev1, other.id)).statusCode, 403)
    assert.equal((await verifyToken(t, other.api_key)).valid, true, 'a refused revocation revoked the key')
    assert.equal((await revoke(ev1, 999_999)).statusCode, 404)
    assert.equal((await revoke(ev1, 'abc')).statusCode, 422)

    const key = (await create(ev1, { event_id: 1, name: 'Short-lived', scopes: ['api:read'] })).json()
    assert.equal((await verifyToken(t, key.api_key)).valid, true)
    const res = await revoke(ev1, key.id)
    assert.equal(res.statusCode, 200)
    assert.equal(typeof res.json().message, 'string')
    assert.deepEqual(await verifyToken(t, key.api_key), { valid: false, claims: null })
    const item = (await list(ev1, 1)).json().find((k: { id: number }) => k.id === key.id)
    assert.ok(item.revoked_at)
    assert.equal((await revoke(ev1, key.id)).statusCode, 200, 'revoking again')
    const stored = await t.db.db
      .selectFrom('event_clients')
      .select('token_hash')
      .where('id', '=', key.id)
      .executeTakeFirstOrThrow()
    assert.equal(stored.token_hash, null, 'revocation clears the stored hash')
  })

  test('rate limits: create 10, revoke 30, list 30 per minute per address', async () => {
    await assertPerMinuteLimit(t, 10, () => ({
      method: 'POST',
      url: '/tokens/api-key',
      token: ev1,
      payload: { event_id: 1, name: 'burst', scopes: ['api:read'] },
    }))
    await assertPerMinuteLimit(t, 30, () => ({ method: 'DELETE', url: '/tokens/api-key/999999', token: ev1 }))
    await assertPerMinuteLimit(t, 30, () => ({
      method: 'GET',
      url: '/tokens/api-keys?event_id=1',
      token: ev1,
    }))
  })
})
