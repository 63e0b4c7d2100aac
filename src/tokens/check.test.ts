import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import {
  forEachBackend,
  login,
  logout,
  revokedApiKey,
  STANDARD_SEED,
  type TestApp,
  verifyToken,
} from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { createApiKey } from '../api-keys/api-keys.store.js'
import { VERIFY_LIMITS } from './verify.routes.js'

/**
 * GET /tokens/check through Fastify (app.inject: the route the verify lane hands over to and answers
 * like; check-lane.test.ts runs the same requests through the lane on a socket). The answers gateways
 * read: 200 with the claims as headers, 401 / 403 with their WWW-Authenticate, never 200 for a bad token.
 */

interface Check {
  token?: string
  url?: string
  method?: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS'
  headers?: Record<string, string>
  payload?: string | Buffer
}

function check(t: TestApp, c: Check = {}): Promise<LightMyRequestResponse> {
  return t.request({
    method: c.method ?? 'GET',
    url: c.url ?? '/tokens/check',
    ...(c.token ? { token: c.token } : {}),
    headers: c.headers ?? {},
    ...(c.payload !== undefined ? { payload: c.payload } : {}),
  })
}

function claimsOf(res: LightMyRequestResponse): Record<string, unknown> {
  return JSON.parse(Buffer.from(String(res.headers['x-auth-claims']), 'base64url').toString())
}

const INVALID = 'Bearer error="invalid_token"'
const INSUFFICIENT = 'Bearer error="insufficient_scope"'

/** A refusal: its status, its WWW-Authenticate, no claim header, never cached. */
function assertRefused(res: LightMyRequestResponse, status: 401 | 403, challenge: string, what: string) {
  assert.equal(res.statusCode, status, `${what}: ${res.body}`)
  assert.equal(res.headers['www-authenticate'], challenge, what)
  assert.equal(res.headers['cache-control'], 'no-store', what)
  for (const name of Object.keys(res.headers))
    assert.ok(!name.startsWith('x-auth-'), `${what}: no claim header (${name})`)
  const code = challenge.match(/error="(\w+)"/)?.[1]
  assert.equal(res.json().error, code, what)
}

forEachBackend(httpBackends, 'GET /tokens/check', (ctx) => {
  let t: TestApp
  let admin: { access_token: string; refresh_token: string }
  let operator: string
  let consumer: string
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    admin = await login(t, 'ev1@example.com')
    operator = (await login(t, 'op@example.com', 'operator')).access_token
    const res = await t.request({
      method: 'POST',
      url: '/auth/login/customer',
      payload: { phone: '+4915100000001', password: 's3cret-pass' },
    })
    consumer = res.json().access_token
  })

  test('a good access token: 200, no body, its claims as headers, exactly what verify says', async () => {
    const res = await check(t, { token: admin.access_token })
    assert.equal(res.statusCode, 200)
    assert.equal(res.body, '')
    assert.equal(res.headers['cache-control'], 'no-store')
    const claims = (await verifyToken(t, admin.access_token)).claims
    assert.deepEqual(claimsOf(res), claims)
    assert.equal(res.headers['x-auth-subject'], claims.sub)
    assert.equal(res.headers['x-auth-role'], 'admin')
    assert.equal(res.headers['x-auth-token-type'], 'access')
    assert.equal(res.headers['x-auth-expires'], String(claims.exp))
    assert.equal(res.headers['x-auth-event-ids'], '1')
    assert.equal(res.headers['www-authenticate'], undefined)
  })

  test('X-Auth-Event-Ids is left out when the token names no event (a superadmin: every event)', async () => {
    const root = (await login(t, 'root@example.com')).access_token
    const res = await check(t, { token: root, url: '/tokens/check?event=2' })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['x-auth-event-ids'], undefined)
    assert.deepEqual(claimsOf(res).permissions, (await verifyToken(t, root)).claims.permissions)
  })

  test('no token: 401 Bearer without an error code; any token that is not good: 401 invalid_token', async () => {
    const none = await check(t)
    assertRefused(none, 401, 'Bearer', 'no Authorization')
    assert.equal(none.json().detail, 'Not authenticated')
    assertRefused(
      await check(t, { headers: { authorization: 'Basic Zm9vOmJhcg==' } }),
      401,
      'Bearer',
      'not a bearer',
    )
    const tampered = `${admin.access_token.slice(0, -3)}${admin.access_token.endsWith('AAA') ? 'BBB' : 'AAA'}`
    for (const [what, token] of [
      ['garbage', 'not-a-token'],
      ['tampered', tampered],
      ['unknown API key', 'wb_unknown'],
      ['a JWT of three empty parts', '..'],
    ] as const) {
      assert.equal((await verifyToken(t, token)).valid, false, `verify refuses ${what} too`)
      assertRefused(await check(t, { token }), 401, INVALID, what)
    }
    // Longer than verify's schema takes (422 there): no token the service issued.
    const long = 'a'.repeat(VERIFY_LIMITS.maxToken + 1)
    assertRefused(await check(t, { token: long }), 401, INVALID, 'longer than any token')
  })

  test('a revoked API key, a rotated and a logged-out refresh token: 401 whatever type is allowed', async () => {
    const key = await revokedApiKey(t)
    assertRefused(
      await check(t, { token: key, url: '/tokens/check?type=api_key' }),
      401,
      INVALID,
      'revoked key',
    )
    const pair = await login(t, 'ev1@example.com')
    const rotated = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: pair.refresh_token },
    })
    assert.equal(rotated.statusCode, 200)
    assertRefused(
      await check(t, { token: pair.refresh_token, url: '/tokens/check?type=refresh' }),
      401,
      INVALID,
      'rotated refresh token',
    )
    const next = rotated.json()
    assert.equal((await logout(t, next.access_token, next.refresh_token)).statusCode, 200)
    assertRefused(
      await check(t, { token: next.refresh_token, url: '/tokens/check?type=refresh' }),
      401,
      INVALID,
      'logged-out refresh token',
    )
  })

  test('a refresh token never passes by default; `type` lets it (and only what it names) through', async () => {
    const pair = await login(t, 'ev1@example.com')
    assertRefused(await check(t, { token: pair.refresh_token }), 401, INVALID, 'refresh, default')
    const allowed = await check(t, { token: pair.refresh_token, url: '/tokens/check?type=refresh' })
    assert.equal(allowed.statusCode, 200)
    assert.equal(allowed.headers['x-auth-token-type'], 'refresh')
    assertRefused(
      await check(t, { token: pair.access_token, url: '/tokens/check?type=refresh' }),
      401,
      INVALID,
      'an access token where only refresh tokens may pass',
    )
    for (const token of [pair.access_token, pair.refresh_token])
      assert.equal((await check(t, { token, url: '/tokens/check?type=access,refresh' })).statusCode, 200)
    const header = await check(t, {
      token: pair.refresh_token,
      headers: { 'wristband-require-type': 'refresh' },
    })
    assert.equal(header.statusCode, 200, 'the same as a header')
  })

  test('an API key is no bearer access token: 401 unless `type=api_key`', async () => {
    const { plaintext } = await createApiKey(t.db.db, {
      event_id: 1,
      name: 'check',
      scopes: ['api:read'],
      created_by: null,
      now: t.clock.now(),
    })
    assertRefused(await check(t, { token: plaintext }), 401, INVALID, 'API key, default')
    const res = await check(t, { token: plaintext, url: '/tokens/check?type=api_key&event=1&scope=api:read' })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['x-auth-token-type'], 'api_key')
    assert.equal(res.headers['x-auth-role'], 'event_client')
  })

  test('role, event and scope unmet: 403 insufficient_scope; met: 200', async () => {
    const cases: [string, string, number][] = [
      [admin.access_token, '?role=admin', 200],
      [admin.access_token, '?role=operator,consumer', 403],
      [admin.access_token, '?role=operator,admin', 200],
      [admin.access_token, '?event=1', 200],
      [admin.access_token, '?event=2', 403],
      [admin.access_token, '?event=1&scope=reports:read', 200],
      [admin.access_token, '?event=1&scope=reports:read,pos:sell', 403],
      [admin.access_token, '?event=2&scope=reports:read', 403],
      // Without an event, a scope must be held for every event ("*").
      [admin.access_token, '?scope=reports:read', 403],
      [operator, '?event=1&scope=ticket:scan', 200],
      [operator, '?event=1&scope=ticket:scan,pos:sell', 200],
      [operator, '?event=1&scope=pos:refund', 403],
      [operator, '?role=operator&event=2', 403],
      [consumer, '?scope=wallet:read', 200],
      [consumer, '?role=consumer&event=7', 200],
      [consumer, '?role=admin', 403],
    ]
    for (const [token, query, status] of cases) {
      const res = await check(t, { token, url: `/tokens/check${query}` })
      if (status === 200) assert.equal(res.statusCode, 200, `${query}: ${res.body}`)
      else assertRefused(res, 403, INSUFFICIENT, query)
    }
  })

  test('requirements as headers; with the query too, both must be met', async () => {
    const token = admin.access_token
    const h = (headers: Record<string, string>, url?: string) => check(t, { token, headers, url })
    assert.equal((await h({ 'wristband-require-role': 'admin' })).statusCode, 200)
    assertRefused(await h({ 'wristband-require-role': 'operator' }), 403, INSUFFICIENT, 'role header')
    assertRefused(await h({ 'wristband-require-event': '2' }), 403, INSUFFICIENT, 'event header')
    assert.equal(
      (await h({ 'wristband-require-event': '1', 'wristband-require-scope': 'reports:read' })).statusCode,
      200,
    )
    assertRefused(
      await h({ 'wristband-require-role': 'operator' }, '/tokens/check?role=admin'),
      403,
      INSUFFICIENT,
      'query allows, header does not',
    )
    assertRefused(
      await h({ 'wristband-require-role': 'admin' }, '/tokens/check?role=operator'),
      403,
      INSUFFICIENT,
      'header allows, query does not',
    )
    assertRefused(
      await h({ 'wristband-require-event': '1' }, '/tokens/check?event=2'),
      403,
      INSUFFICIENT,
      'two events: both must be reached',
    )
    assert.equal(
      (await h({ 'wristband-require-role': 'admin' }, '/tokens/check?role=admin,operator')).statusCode,
      200,
    )
  })

  test('a requirement out of form is 422 (never read as none), after authentication (401 first)', async () => {
    const token = admin.access_token
    const bad: [string, Record<string, string>, string, string][] = [
      ['/tokens/check?roles=admin', {}, 'query', 'extra_forbidden'],
      ['/tokens/check?role=root', {}, 'query', 'string_pattern_mismatch'],
      ['/tokens/check?role=admin,', {}, 'query', 'string_pattern_mismatch'],
      ['/tokens/check?type=bearer', {}, 'query', 'string_pattern_mismatch'],
      ['/tokens/check?event=01', {}, 'query', 'int_parsing'],
      ['/tokens/check?event=0', {}, 'query', 'greater_than_equal'],
      ['/tokens/check?scope=everything', {}, 'query', 'string_pattern_mismatch'],
      ['/tokens/check?role=admin&role=operator', {}, 'query', 'string_type'],
      ['/tokens/check', { 'wristband-require-event': '1e0' }, 'header', 'int_parsing'],
      ['/tokens/check', { 'wristband-require-role': 'admin, operator' }, 'header', 'string_pattern_mismatch'],
      ['/tokens/check', { 'wristband-require-roles': 'admin' }, 'header', 'extra_forbidden'],
    ]
    for (const [url, headers, where, type] of bad) {
      const what = `${url} ${JSON.stringify(headers)}`
      const res = await check(t, { token, url, headers })
      assert.equal(res.statusCode, 422, `${what}: ${res.body}`)
      const issue = res.json().detail[0]
      assert.equal(issue.loc[0], where, what)
      assert.equal(issue.type, type, what)
      assertRefused(await check(t, { url, headers }), 401, 'Bearer', `${what} without a token`)
    }
  })

  test('a path under /tokens/check answers the same; its query is the original request’s, not read', async () => {
    const token = admin.access_token
    const url = '/tokens/check/some/original/path?role=consumer&x=%zz'
    const res = await check(t, { token, url })
    assert.equal(res.statusCode, 200, res.body)
    assert.deepEqual(claimsOf(res), claimsOf(await check(t, { token })))
    assert.equal((await check(t, { token, url: '/tokens/check/' })).statusCode, 200)
    assertRefused(await check(t, { url }), 401, 'Bearer', 'no token')
    assertRefused(
      await check(t, { token, url, headers: { 'wristband-require-role': 'consumer' } }),
      403,
      INSUFFICIENT,
      'requirement header',
    )
  })

  test('every method a gateway may forward answers the same; a HEAD has no body', async () => {
    for (const method of ['HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const) {
      for (const url of ['/tokens/check', '/tokens/check/app/page']) {
        const ok = await check(t, { method, url, token: admin.access_token })
        assert.equal(ok.statusCode, 200, `${method} ${url}: ${ok.body}`)
        assert.equal(ok.headers['x-auth-role'], 'admin', `${method} ${url}`)
        assert.equal(ok.body, '')
        const refused = await check(t, { method, url, token: 'nope' })
        assert.equal(refused.statusCode, 401, `${method} ${url}`)
        assert.equal(refused.headers['www-authenticate'], INVALID)
        if (method === 'HEAD') assert.equal(refused.body, '')
      }
    }
  })

  test('the body is ignored: not JSON, another type, larger than BODY_LIMIT_BYTES', async () => {
    const token = admin.access_token
    const bodies: [string, Record<string, string>, string | Buffer][] = [
      ['malformed JSON', { 'content-type': 'application/json' }, '{"token":'],
      ['JSON naming another token', { 'content-type': 'application/json' }, JSON.stringify({ token: 'x' })],
      ['text', { 'content-type': 'text/plain' }, 'hello'],
      ['a form', { 'content-type': 'application/x-www-form-urlencoded' }, 'a=1&b=2'],
      ['no type', {}, Buffer.from([0xff, 0xfe, 0x00])],
      ['over the body limit', { 'content-type': 'application/octet-stream' }, Buffer.alloc(200_000, 1)],
    ]
    for (const [what, headers, payload] of bodies) {
      for (const method of ['POST', 'PUT'] as const) {
        const res = await check(t, { method, token, headers, payload })
        assert.equal(res.statusCode, 200, `${method} ${what}: ${res.body}`)
        const refused = await check(t, { method, headers, payload })
        assert.equal(refused.statusCode, 401, `${method} ${what} without a token`)
      }
    }
  })

  // Moves the suite's clock forward, so it runs last.
  test('an expired token: 401 invalid_token', async () => {
    const fresh = (await login(t, 'ev1@example.com')).access_token
    t.clock.advance(15 * 60_000 - 5_000)
    assert.equal((await check(t, { token: fresh })).statusCode, 200, 'still good just before exp')
    t.clock.advance(10_000)
    assertRefused(await check(t, { token: fresh }), 401, INVALID, 'expired')
  })
})

forEachBackend(
  httpBackends,
  'GET /tokens/check with CHECK_CACHE_SECONDS and CORS',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
    })

    test('an allowed answer may be cached CHECK_CACHE_SECONDS, never past the token expiry; a refusal never', async () => {
      const token = (await login(t, 'ev1@example.com')).access_token
      const res = await check(t, { token })
      assert.equal(res.statusCode, 200)
      assert.equal(res.headers['cache-control'], 'max-age=5, must-revalidate')
      assert.match(String(res.headers.vary), /^authorization, wristband-require-role, /)
      assert.equal((await check(t, { token: 'x' })).headers['cache-control'], 'no-store')
      const exp = Number(res.headers['x-auth-expires'])
      t.clock.advance(exp * 1000 - t.clock.now() - 2_500)
      assert.equal((await check(t, { token })).headers['cache-control'], 'max-age=2, must-revalidate')
      t.clock.advance(2_000)
      const last = await check(t, { token })
      assert.equal(last.statusCode, 200, 'good for half a second more')
      assert.equal(last.headers['cache-control'], 'no-store', 'less than a second left: not cached')
    })

    test('a CORS preflight gets the check’s answer, never a 204 a gateway would read as allowed', async () => {
      const preflight = {
        origin: 'https://app.example.com',
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'authorization',
      }
      const res = await check(t, { method: 'OPTIONS', headers: preflight })
      assert.equal(res.statusCode, 401)
      assert.equal(res.headers['access-control-allow-origin'], undefined)
      // Elsewhere the preflight is answered as before.
      const other = await t.request({ method: 'OPTIONS', url: '/tokens/verify', headers: preflight })
      assert.equal(other.statusCode, 204)
    })
  },
  { CHECK_CACHE_SECONDS: '5', CORS_ORIGINS: 'https://app.example.com' },
)

forEachBackend(
  httpBackends,
  'GET /tokens/check: the budgets of POST /tokens/verify',
  (ctx) => {
    let t: TestApp
    let token: string
    let credential: string
    let notACredential: string
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
      token = (await login(t, 'ev1@example.com')).access_token
      const key = (scopes: string[]) =>
        createApiKey(t.db.db, { event_id: 1, name: 'gateway', scopes, created_by: null, now: t.clock.now() })
      credential = (await key(['tokens:verify'])).plaintext
      notACredential = (await key(['api:read'])).plaintext
    })
    const from = (address: string, apiKey?: string) => ({
      'x-forwarded-for': address,
      ...(apiKey ? { api_key: apiKey } : {}),
    })

    test('without a credential: the address’s budget, shared with verify', async () => {
      const headers = from('203.0.113.1')
      const verify = await t.request({ method: 'POST', url: '/tokens/verify', headers, payload: { token } })
      assert.equal(verify.headers['x-ratelimit-remaining'], '2')
      for (const left of ['1', '0']) {
        const res = await check(t, { token, headers })
        assert.equal(res.statusCode, 200)
        assert.equal(res.headers['x-ratelimit-limit'], '3')
        assert.equal(res.headers['x-ratelimit-remaining'], left)
      }
      const over = await check(t, { token, headers })
      assert.equal(over.statusCode, 429)
      assert.equal(over.json().error, 'rate_limit_exceeded')
      const key = await check(t, { token, headers: from('203.0.113.1', notACredential) })
      assert.equal(key.statusCode, 429, 'a key that is no verify credential counts as none')
    })

    test('with a verify credential in `api_key`: its own budget, whatever the address', async () => {
      for (let i = 0; i < 5; i++) {
        const res = await check(t, { token, headers: from(`203.0.113.${10 + i}`, credential) })
        assert.equal(res.statusCode, 200, res.body)
        assert.equal(res.headers['x-ratelimit-limit'], '5')
        assert.equal(res.headers['x-ratelimit-remaining'], String(4 - i))
      }
      assert.equal((await check(t, { token, headers: from('203.0.113.20', credential) })).statusCode, 429)
      const verify = await t.request({
        method: 'POST',
        url: '/tokens/verify',
        headers: from('203.0.113.21'),
        payload: { token, api_key: credential },
      })
      assert.equal(verify.statusCode, 429, 'one budget per credential, verify and check together')
      // A refusal of the token is counted the same (junk tokens spend the gateway's own budget).
      assert.equal((await check(t, { token: 'x', headers: from('203.0.113.22') })).statusCode, 401)
    })
  },
  { VERIFY_CLIENT_RATE_LIMIT: '5' },
  () => ({ verifyLimits: { ...VERIFY_LIMITS, anonymousPerMinute: 3 } }),
)
