import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp, verifyToken, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

forEachBackend(httpBackends, 'POST /auth/login/customer', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed(
      withStandardSeed({
        customers: [
          // A consumer created without a password (as by a provider sign-in) cannot use this route.
          { phone: '+4915100000009' },
          { phone: '+4915100000008', password: 's3cret-pass' },
        ],
      }),
    )
  })

  test('phone and password give a consumer token pair with the consumer baseline scopes', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/auth/login/customer',
      payload: { phone: '+4915100000001', password: 's3cret-pass' },
    })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['cache-control'], 'no-store')
    const body = res.json()
    assert.equal(body.token_type, 'bearer')
    const claims = (await verifyToken(t, body.access_token)).claims
    assert.equal(claims.type, 'access')
    assert.equal(claims.role, 'consumer')
    assert.deepEqual(claims.permissions, {
      '*': ['wallet:read', 'wallet:topup', 'profile:read', 'profile:write'],
    })
    const refreshed = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: body.refresh_token },
    })
    assert.equal(refreshed.statusCode, 200, 'a consumer refresh token rotates')
  })

  test('the number is normalised to E.164 before the look-up', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/auth/login/customer',
      payload: { phone: ' +49 151 0000-0001 ', password: 's3cret-pass' },
    })
    assert.equal(res.statusCode, 200)
  })

  test('every failure branch answers the same 401', async () => {
    const attempts = [
      { phone: '+4915100000002', password: 's3cret-pass' },
      { phone: '+4915100000001', password: 'wrong-password' },
      { phone: '+4915100000009', password: 's3cret-pass' },
      { phone: '+4915100000009', password: '' },
    ]
    const answers = await Promise.all(
      attempts.map((payload) => t.request({ method: 'POST', url: '/auth/login/customer', payload })),
    )
    for (const res of answers) {
      assert.equal(res.statusCode, 401)
      assert.equal(res.headers['www-authenticate'], 'Bearer')
    }
    assert.equal(new Set(answers.map((r) => r.body)).size, 1, 'bodies differ between failure branches')
  })

  test('repeated wrong passwords for one phone are slowed down whatever the address', async () => {
    const payload = { phone: '+4915100000008', password: 'wrong-password' }
    for (let i = 0; i < 6; i++)
      assert.equal(
        (await t.request({ method: 'POST', url: '/auth/login/customer', payload })).statusCode,
        401,
      )
    const locked = await t.request({
      method: 'POST',
      url: '/auth/login/customer',
      payload: { phone: '+4915100000008', password: 's3cret-pass' },
    })
    assert.equal(locked.statusCode, 429)
    t.clock.advance(16 * 60_000)
    const after = await t.request({
      method: 'POST',
      url: '/auth/login/customer',
      payload: { phone: '+4915100000008', password: 's3cret-pass' },
    })
    assert.equal(after.statusCode, 200)
  })

  test('a number that is not a phone number is a 422 on body.phone', async () => {
    for (const phone of ['12345', '015100000001', '+999', 'not a phone', '+447700900123']) {
      const res = await t.request({
        method: 'POST',
        url: '/auth/login/customer',
        payload: { phone, password: 's3cret-pass' },
      })
      assert.equal(res.statusCode, 422, phone)
      const [issue] = res.json().detail
      assert.deepEqual(issue.loc, ['body', 'phone'])
      assert.equal(issue.type, 'value_error')
    }
  })

  test('unknown properties and missing fields are 422', async () => {
    const extra = await t.request({
      method: 'POST',
      url: '/auth/login/customer',
      payload: { phone: '+4915100000001', password: 'x', role: 'admin' },
    })
    assert.equal(extra.statusCode, 422)
    assert.equal(extra.json().detail[0].type, 'extra_forbidden')
    const missing = await t.request({
      method: 'POST',
      url: '/auth/login/customer',
      payload: { phone: '+4915100000001' },
    })
    assert.equal(missing.statusCode, 422)
    assert.deepEqual(missing.json().detail[0].loc, ['body', 'password'])
  })

  test('the 11th attempt from one address within a minute is 429', async () => {
    const headers = { 'x-forwarded-for': '198.51.100.10' }
    // A different unknown phone each time, so the per-account back-off does not answer first.
    const payload = (i: number) => ({ phone: `+491510000010${i}`, password: 'wrong-password' })
    for (let i = 0; i < 10; i++) {
      const res = await t.request({
        method: 'POST',
        url: '/auth/login/customer',
        payload: payload(i),
        headers,
      })
      assert.equal(res.statusCode, 401)
    }
    const limited = await t.request({
      method: 'POST',
      url: '/auth/login/customer',
      payload: payload(0),
      headers,
    })
    assert.equal(limited.statusCode, 429)
    assert.equal(limited.json().limit, 10)
  })
})
