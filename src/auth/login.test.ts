import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { backends } from '../../test/helpers/backends.js'

forEachBackend(backends, 'POST /auth/login', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
  })

  test('an administrator signs in and gets a bearer token pair', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/auth/login',
      payload: { email: 'ev1@example.com', password: 's3cret-pass' },
    })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['cache-control'], 'no-store')
    const body = res.json()
    assert.equal(body.token_type, 'bearer')
    assert.equal(body.expires_in, 15 * 60)
    const verified = await t.request({
      method: 'POST',
      url: '/tokens/verify',
      payload: { token: body.access_token },
    })
    const { valid, claims } = verified.json()
    assert.equal(valid, true)
    assert.equal(claims.type, 'access')
    assert.equal(claims.role, 'admin')
    assert.deepEqual(claims.event_ids, [1])
    assert.deepEqual(Object.keys(claims.permissions), ['1'])
    assert.ok(claims.permissions['1'].includes('billing:manage'))
    assert.equal(claims.aud, 'wristband')
    assert.equal(claims.iss, 'wristband')
    assert.equal(claims.exp - claims.iat, 15 * 60)
  })

  test('every failure branch answers the same 401', async () => {
    const attempts = [
      { email: 'nobody@example.com', password: 's3cret-pass' },
      { email: 'ev1@example.com', password: 'wrong-password' },
      { email: 'ev1@example.com', password: 's3cret-pass', role: 'operator' },
      { email: 'op@example.com', password: 's3cret-pass', role: 'network_manager' },
    ]
    const answers = await Promise.all(
      attempts.map((payload) => t.request({ method: 'POST', url: '/auth/login', payload })),
    )
    for (const res of answers) {
      assert.equal(res.statusCode, 401)
      assert.equal(res.headers['www-authenticate'], 'Bearer')
    }
    assert.equal(new Set(answers.map((r) => r.body)).size, 1, 'bodies differ between failure branches')
  })

  test('role selects the account table: operator and network manager', async () => {
    const op = await login(t, 'op@example.com', 'operator')
    const opClaims = (
      await t.request({ method: 'POST', url: '/tokens/verify', payload: { token: op.access_token } })
    ).json().claims
    assert.equal(opClaims.role, 'operator')
    assert.deepEqual(opClaims.permissions, { '1': ['pos:sell', 'ticket:scan'] })
    const nm = await login(t, 'nm@example.com', 'network_manager')
    const nmClaims = (
      await t.request({ method: 'POST', url: '/tokens/verify', payload: { token: nm.access_token } })
    ).json().claims
    assert.equal(nmClaims.role, 'network_manager')
    assert.deepEqual(nmClaims.permissions, {
      '1': ['events:manage', 'reports:read', 'devices:manage', 'users:manage'],
    })
  })
})
