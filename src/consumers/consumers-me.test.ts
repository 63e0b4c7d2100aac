import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

forEachBackend(httpBackends, 'GET/PATCH /consumers/me', (ctx) => {
  let t: TestApp
  let token: string
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    const res = await t.request({
      method: 'POST',
      url: '/auth/login/customer',
      payload: { phone: '+4915100000001', password: 's3cret-pass' },
    })
    token = res.json().access_token
  })

  test('a consumer reads its own profile', async () => {
    const res = await t.request({ method: 'GET', url: '/consumers/me', token })
    assert.equal(res.statusCode, 200)
    const body = res.json()
    assert.equal(body.phone, '+4915100000001')
    assert.equal(body.email, 'holder@example.com')
    assert.equal(body.has_password, true)
    assert.deepEqual(body.identity_providers, [])
    assert.ok(!('password_hash' in body))
    assert.ok(!Number.isNaN(Date.parse(body.created_at)))
  })

  test('PATCH changes names and e-mail; null clears a field', async () => {
    const res = await t.request({
      method: 'PATCH',
      url: '/consumers/me',
      token,
      payload: { first_name: 'Hanna', last_name: 'Holder', email: 'Hanna@Example.com' },
    })
    assert.equal(res.statusCode, 200)
    assert.equal(res.json().first_name, 'Hanna')
    assert.equal(res.json().email, 'hanna@example.com')
    const cleared = await t.request({
      method: 'PATCH',
      url: '/consumers/me',
      token,
      payload: { last_name: null },
    })
    assert.equal(cleared.json().last_name, null)
    assert.equal(cleared.json().first_name, 'Hanna')
    const read = await t.request({ method: 'GET', url: '/consumers/me', token })
    assert.deepEqual(read.json(), cleared.json())
  })

  test('a changed e-mail counts as self-asserted (it is not proven)', async () => {
    const row = await t.db.db
      .selectFrom('customers')
      .select('email_self_asserted')
      .where('phone', '=', '+4915100000001')
      .executeTakeFirstOrThrow()
    assert.equal(row.email_self_asserted, 1)
  })

  test('the phone number cannot be changed here; bad values are 422', async () => {
    const phone = await t.request({
      method: 'PATCH',
      url: '/consumers/me',
      token,
      payload: { phone: '+4915100000002' },
    })
    assert.equal(phone.statusCode, 422)
    assert.equal(phone.json().detail[0].type, 'extra_forbidden')
    const email = await t.request({
      method: 'PATCH',
      url: '/consumers/me',
      token,
      payload: { email: 'nope' },
    })
    assert.equal(email.statusCode, 422)
    assert.deepEqual(email.json().detail[0].loc, ['body', 'email'])
    const long = await t.request({
      method: 'PATCH',
      url: '/consumers/me',
      token,
      payload: { first_name: 'x'.repeat(101) },
    })
    assert.equal(long.json().detail[0].type, 'string_too_long')
  })

  test('no token is 401 (before validation); a staff token is 403', async () => {
    const none = await t.request({ method: 'GET', url: '/consumers/me' })
    assert.equal(none.statusCode, 401)
    assert.equal(none.headers['www-authenticate'], 'Bearer')
    const unauthInvalid = await t.request({ method: 'PATCH', url: '/consumers/me', payload: { phone: 'x' } })
    assert.equal(unauthInvalid.statusCode, 401)
    const admin = await login(t, 'root@example.com')
    const forbidden = await t.request({ method: 'GET', url: '/consumers/me', token: admin.access_token })
    assert.equal(forbidden.statusCode, 403)
    const forbiddenPatch = await t.request({
      method: 'PATCH',
      url: '/consumers/me',
      token: admin.access_token,
      payload: { first_name: 'x' },
    })
    assert.equal(forbiddenPatch.statusCode, 403)
  })

  test('a refresh token is not accepted as bearer', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/auth/login/customer',
      payload: { phone: '+4915100000001', password: 's3cret-pass' },
    })
    const me = await t.request({ method: 'GET', url: '/consumers/me', token: res.json().refresh_token })
    assert.equal(me.statusCode, 401)
  })
})
