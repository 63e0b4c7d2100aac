import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { eventAdmin, forEachBackend, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

forEachBackend(httpBackends, 'GET /admin/me', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed(
      withStandardSeed({
        administrators: [eventAdmin('leaving@example.com', [2])],
      }),
    )
  })
  const me = (token?: string) => t.request({ method: 'GET', url: '/admin/me', ...(token ? { token } : {}) })

  test('an administrator gets its profile, and nothing more', async () => {
    const res = await me((await login(t, 'ev1@example.com')).access_token)
    assert.equal(res.statusCode, 200)
    const body = res.json()
    assert.deepEqual(Object.keys(body).sort(), [
      'created_at',
      'email',
      'event_ids',
      'id',
      'is_two_factor_authentication_enabled',
      'role',
    ])
    assert.equal(body.email, 'ev1@example.com')
    assert.equal(body.role, 'admin')
    assert.deepEqual(body.event_ids, [1])
    assert.equal(body.is_two_factor_authentication_enabled, false)
    assert.ok(!Number.isNaN(Date.parse(body.created_at)))
    const stored = await t.db.db
      .selectFrom('administrators')
      .select('id')
      .where('email', '=', 'ev1@example.com')
      .executeTakeFirstOrThrow()
    assert.equal(body.id, stored.id)
  })

  test('a superadmin is shown as superadmin with every event (empty list)', async () => {
    const body = (await me((await login(t, 'root@example.com')).access_token)).json()
    assert.equal(body.role, 'superadmin')
    assert.deepEqual(body.event_ids, [])
  })

  test('no token: 401 with WWW-Authenticate: Bearer', async () => {
    for (const authorization of [undefined, 'Bearer', 'Basic dXNlcjpwYXNz', 'Bearer not-a-token']) {
      const res = await t.request({
        method: 'GET',
        url: '/admin/me',
        headers: authorization ? { authorization } : {},
      })
      assert.equal(res.statusCode, 401, String(authorization))
      assert.equal(res.headers['www-authenticate'], 'Bearer')
      assert.equal(typeof res.json().detail, 'string')
    }
  })

  test('an operator or network manager token: 403', async () => {
    for (const [email, role] of [
      ['op@example.com', 'operator'],
      ['nm@example.com', 'network_manager'],
    ] as const) {
      const res = await me((await login(t, email, role)).access_token)
      assert.equal(res.statusCode, 403, role)
      assert.equal(typeof res.json().detail, 'string')
    }
  })

  test('a refresh token used as bearer: 401', async () => {
    const res = await me((await login(t, 'ev1@example.com')).refresh_token)
    assert.equal(res.statusCode, 401)
    assert.equal(res.headers['www-authenticate'], 'Bearer')
  })

  test('an administrator disabled after sign-in: 401 with the still-unexpired token', async () => {
    const { access_token } = await login(t, 'leaving@example.com')
    assert.equal((await me(access_token)).statusCode, 200)
    await t.db.db
      .updateTable('administrators')
      .set({ disabled: 1 })
      .where('email', '=', 'leaving@example.com')
      .execute()
    assert.equal((await me(access_token)).statusCode, 401)
  })

  // Moves the suite's clock forward, so it runs last.
  test('an expired access token: 401', async () => {
    const { access_token } = await login(t, 'ev1@example.com')
    t.clock.advance(16 * 60_000)
    assert.equal((await me(access_token)).statusCode, 401)
  })
})
