import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import {
  forEachBackend,
  login,
  nextAddress,
  STANDARD_SEED,
  type TestApp,
  withTwoInstances,
} from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { until } from '../../test/helpers/until.js'

/** Creates an API key of event 1 through the API, as its administrator would. */
async function apiKey(t: TestApp, scopes: string[]): Promise<{ id: number; api_key: string }> {
  const admin = (await login(t, 'ev1@example.com')).access_token
  const res = await t.request({
    method: 'POST',
    url: '/tokens/api-key',
    token: admin,
    payload: { event_id: 1, name: `key-${nextAddress()}`, scopes },
  })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString()
const FORM = { 'content-type': 'application/x-www-form-urlencoded' }

forEachBackend(httpBackends, 'RFC 7662 introspection and RFC 7009 revocation', (ctx) => {
  let t: TestApp
  let credential: string
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    credential = (await apiKey(t, ['tokens:verify'])).api_key
  })

  /** POST /oauth2/introspect as a form with the verify credential as a Bearer token. */
  const introspect = (token: string, extra: Record<string, string> = {}) =>
    t.request({
      method: 'POST',
      url: '/oauth2/introspect',
      headers: { ...FORM, authorization: `Bearer ${credential}` },
      payload: form({ token, ...extra }),
    })
  const revoke = (token: string) =>
    t.request({ method: 'POST', url: '/oauth2/revoke', headers: FORM, payload: form({ token }) })

  test('a good access token: active, with sub, exp, iat, jti, token_type, role, iss, aud and the claims', async () => {
    const { access_token } = await login(t, 'ev1@example.com')
    const res = await introspect(access_token)
    assert.equal(res.statusCode, 200, res.body)
    assert.equal(res.headers['cache-control'], 'no-store')
    const body = res.json()
    const verified = (
      await t.request({ method: 'POST', url: '/tokens/verify', payload: { token: access_token } })
    ).json().claims
    assert.deepEqual(body, { active: true, token_type: 'bearer', ...verified })
    for (const k of ['sub', 'exp', 'iat', 'jti', 'role', 'iss', 'aud', 'type', 'event_ids', 'permissions'])
      assert.ok(k in body, k)
    assert.equal(body.type, 'access')
  })

  test('the credential in the api_key header, and a JSON body, are taken too', async () => {
    const { access_token } = await login(t, 'ev1@example.com')
    const res = await t.request({
      method: 'POST',
      url: '/oauth2/introspect',
      headers: { api_key: credential },
      payload: { token: access_token },
    })
    assert.equal(res.statusCode, 200, res.body)
    assert.equal(res.json().active, true)
  })

  test('no verify credential: 401 with WWW-Authenticate, whatever the token', async () => {
    const { access_token } = await login(t, 'ev1@example.com')
    const partnerKey = (await apiKey(t, ['api:read'])).api_key
    const cases: [Record<string, string>, string][] = [
      [{}, 'Bearer'],
      [{ authorization: `Bearer ${access_token}` }, 'Bearer error="invalid_token"'],
      [{ authorization: `Bearer ${partnerKey}` }, 'Bearer error="invalid_token"'],
      [{ api_key: 'wb_madeup' }, 'Bearer error="invalid_token"'],
      [{ authorization: `Basic ${Buffer.from(`x:${credential}`).toString('base64')}` }, 'Bearer'],
    ]
    for (const [headers, challenge] of cases) {
      const res = await t.request({
        method: 'POST',
        url: '/oauth2/introspect',
        headers: { ...FORM, ...headers },
        payload: form({ token: access_token }),
      })
      assert.equal(res.statusCode, 401, JSON.stringify(headers))
      assert.equal(res.headers['www-authenticate'], challenge, JSON.stringify(headers))
      assert.ok('detail' in res.json())
    }
  })

  test('revoked, refresh, garbage, forged, unknown: exactly {"active": false}', async () => {
    const pair = await login(t, 'ev1@example.com')
    const revoked = (await login(t, 'ev1@example.com')).access_token
    assert.equal((await revoke(revoked)).statusCode, 200)
    const [h, p] = pair.access_token.split('.')
    const revokedKey = (await apiKey(t, ['api:read'])).api_key
    assert.equal((await revoke(revokedKey)).statusCode, 200)
    for (const token of [
      revoked,
      pair.refresh_token,
      'garbage',
      'a.b.c',
      `${h}.${p}.forged`,
      'wb_unknown',
      'wbs_unknown',
      revokedKey,
      'x'.repeat(8192),
      'with\u0000nul',
    ]) {
      const res = await introspect(token)
      assert.equal(res.statusCode, 200, token.slice(0, 40))
      assert.equal(res.body, '{"active":false}', token.slice(0, 40))
    }
  })

  test('token_type_hint is not needed, and a wrong one is ignored', async () => {
    const { access_token } = await login(t, 'ev1@example.com')
    for (const hint of ['access_token', 'refresh_token', 'no_such_type'])
      assert.equal((await introspect(access_token, { token_type_hint: hint })).json().active, true, hint)
  })

  test('a malformed request: 400 invalid_request (RFC 6749 section 5.2), on both endpoints', async () => {
    const { access_token } = await login(t, 'ev1@example.com')
    const bodies: [string, string, string][] = [
      ['', 'application/x-www-form-urlencoded', 'missing'],
      ['token=', 'application/x-www-form-urlencoded', 'missing'],
      ['token_type_hint=access_token', 'application/x-www-form-urlencoded', 'missing'],
      [`token=${access_token}&token=${access_token}`, 'application/x-www-form-urlencoded', 'more than once'],
      ['{}', 'application/json', 'missing'],
      ['{"token": 5}', 'application/json', 'not valid'],
    ]
    for (const url of ['/oauth2/introspect', '/oauth2/revoke'])
      for (const [payload, type, says] of bodies) {
        const res = await t.request({
          method: 'POST',
          url,
          headers: { 'content-type': type, authorization: `Bearer ${credential}` },
          payload,
        })
        assert.equal(res.statusCode, 400, `${url} ${payload}`)
        const body = res.json()
        assert.equal(body.error, 'invalid_request')
        assert.match(body.error_description, new RegExp(says))
        assert.equal(body.detail, body.error_description)
      }
    // Unknown parameters are ignored (RFC 6749 section 3.2).
    const res = await introspect(access_token, { client_id: 'my-backend', resource: 'x' })
    assert.equal(res.json().active, true)
  })

  test('revoking: 200 for any token, known or not; an access token stops verifying at once', async () => {
    const { access_token } = await login(t, 'ev1@example.com')
    for (const token of ['garbage', 'wb_unknown', 'wbs_unknown', 'a.b.c', access_token, access_token]) {
      const res = await revoke(token)
      assert.equal(res.statusCode, 200, token)
      assert.deepEqual(res.json(), {})
    }
    const verified = await t.request({
      method: 'POST',
      url: '/tokens/verify',
      payload: { token: access_token },
    })
    assert.equal(verified.json().valid, false)
    // Through JSON too, and the token presented is the only authority needed.
    const other = (await login(t, 'ev1@example.com')).access_token
    const json = await t.request({ method: 'POST', url: '/oauth2/revoke', payload: { token: other } })
    assert.equal(json.statusCode, 200)
    assert.equal((await introspect(other)).body, '{"active":false}')
  })

  test('revoking a refresh token ends its family: the rotated sibling stops refreshing', async () => {
    const first = await login(t, 'ev1@example.com')
    const rotated = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: first.refresh_token },
    })
    assert.equal(rotated.statusCode, 200)
    const second = rotated.json()
    // The old (rotated) token is presented: possession of any token of the family ends it.
    assert.equal((await revoke(first.refresh_token)).statusCode, 200)
    const refused = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: second.refresh_token },
    })
    assert.equal(refused.statusCode, 401)
    const verified = await t.request({
      method: 'POST',
      url: '/tokens/verify',
      payload: { token: second.refresh_token },
    })
    assert.equal(verified.json().valid, false)
  })

  test('revoking an API key or an operator session token by possession ends it', async () => {
    const key = (await apiKey(t, ['api:read'])).api_key
    assert.equal((await revoke(key)).statusCode, 200)
    const viaKey = await t.request({ method: 'GET', url: '/companies/tickets', headers: { api_key: key } })
    assert.equal(viaKey.statusCode, 401)
    const session = await t.request({
      method: 'POST',
      url: '/devices/operator-token',
      payload: {
        email: 'op@example.com',
        password: 's3cret-pass',
        dev_type: 'POS',
        dev_mac: 'AA:BB:CC:DD:EE:01',
      },
    })
    assert.equal(session.statusCode, 200, session.body)
    const sessionToken = session.json().token as string
    assert.equal((await introspect(sessionToken)).json().active, true)
    assert.equal((await revoke(sessionToken)).statusCode, 200)
    assert.equal((await introspect(sessionToken)).body, '{"active":false}')
  })

  test('what was revoked is audited; what was no good token is not', async () => {
    const { access_token } = await login(t, 'ev1@example.com')
    const count = async () =>
      (await t.db.db.selectFrom('audit_log').select('id').where('kind', '=', 'token_revoked').execute())
        .length
    const before = await count()
    await revoke('garbage')
    await revoke(access_token)
    await revoke(access_token)
    assert.equal(await count(), before + 1)
  })

  test('metadata (RFC 8414): issuer, both endpoints, their auth methods, the documentation', async () => {
    const res = await t.request({ method: 'GET', url: '/.well-known/oauth-authorization-server' })
    assert.equal(res.statusCode, 200)
    const issuer = t.config.PUBLIC_BASE_URL.replace(/\/+$/, '')
    assert.deepEqual(res.json(), {
      issuer,
      introspection_endpoint: `${issuer}/oauth2/introspect`,
      introspection_endpoint_auth_methods_supported: ['Bearer'],
      revocation_endpoint: `${issuer}/oauth2/revoke`,
      revocation_endpoint_auth_methods_supported: ['none'],
      response_types_supported: [],
      service_documentation: `${issuer}/docs`,
    })
  })

  test('introspection shares verify budgets: a credential its own, an anonymous caller the address', async () => {
    t.clock.freeze()
    const address = '198.51.100.70'
    const { access_token } = await login(t, 'ev1@example.com')
    const send = (headers: Record<string, string>) =>
      t.request({
        method: 'POST',
        url: '/oauth2/introspect',
        headers: { ...FORM, 'x-forwarded-for': address, ...headers },
        payload: form({ token: access_token }),
      })
    const verify = (payload: Record<string, string>) =>
      t.request({ method: 'POST', url: '/tokens/verify', headers: { 'x-forwarded-for': address }, payload })
    const fresh = (await apiKey(t, ['tokens:verify'])).api_key
    const one = await send({ authorization: `Bearer ${fresh}` })
    const two = await verify({ token: access_token, api_key: fresh })
    assert.deepEqual(
      [one.headers['x-ratelimit-remaining'], two.headers['x-ratelimit-remaining']],
      [String(t.config.VERIFY_CLIENT_RATE_LIMIT - 1), String(t.config.VERIFY_CLIENT_RATE_LIMIT - 2)],
    )
    // Without a credential: the address's anonymous budget, the same counters as verify's.
    for (let i = 1; i <= 600; i++) assert.equal((await verify({ token: 'x' })).statusCode, 200)
    assert.equal((await send({})).statusCode, 429, 'rate limit before authentication')
    assert.equal((await send({ authorization: `Bearer ${fresh}` })).statusCode, 200)
    t.clock.thaw()
  })

  // Moves the suite's clock forward, so it runs last.
  test('an expired token: exactly {"active": false}', async () => {
    const { access_token } = await login(t, 'ev1@example.com')
    assert.equal((await introspect(access_token)).json().active, true)
    t.clock.advance(t.config.ACCESS_TOKEN_EXPIRE_MINUTES * 60_000 + 1000)
    assert.equal((await introspect(access_token)).body, '{"active":false}')
  })
})

eachBackend(httpBackends, 'RFC 7009 revocation across a fleet', (backend) => {
  test('an access token revoked on one instance: the other refuses it at verify and introspection', async () => {
    await withTwoInstances(backend, {}, async (a, b) => {
      await a.seed(STANDARD_SEED)
      const key = (await apiKey(a, ['tokens:verify'])).api_key
      const { access_token } = await login(a, 'ev1@example.com')
      const verify = async (on: TestApp) =>
        (await on.request({ method: 'POST', url: '/tokens/verify', payload: { token: access_token } })).json()
          .valid as boolean
      assert.equal(await verify(b), true)
      const revoked = await a.request({
        method: 'POST',
        url: '/oauth2/revoke',
        payload: { token: access_token },
      })
      assert.equal(revoked.statusCode, 200)
      // Within REVOCATION_POLL_MS (1 s) from the database, at once through Redis's feed.
      await until('the other instance refuses the revoked token', async () => !(await verify(b)))
      const introspected = await b.request({
        method: 'POST',
        url: '/oauth2/introspect',
        headers: { authorization: `Bearer ${key}` },
        payload: { token: access_token },
      })
      assert.equal(introspected.body, '{"active":false}')
    })
  })
})
