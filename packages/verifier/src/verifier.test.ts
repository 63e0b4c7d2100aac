import assert from 'node:assert/strict'
import net from 'node:net'
import { before, test } from 'node:test'
import { createApiKey, revokeApiKey } from '../../../src/api-keys/api-keys.store.js'
import { forEachBackend, login, STANDARD_SEED, type TestApp } from '../../../test/helpers/app.js'
import { httpBackends } from '../../../test/helpers/backends.js'
import { type ServedService, serve } from './test-support.js'
import { createVerifier, VerifierError, type VerifierOptions } from './verifier.js'

/** Asserts that `p` rejects with a VerifierError of `kind` and returns it. */
async function refused(p: Promise<unknown>, kind: 'invalid' | 'unavailable'): Promise<VerifierError> {
  try {
    await p
  } catch (err) {
    assert.ok(err instanceof VerifierError, `expected a VerifierError, got ${err}`)
    assert.equal(err.kind, kind, err.message)
    assert.equal(err.status, kind === 'invalid' ? 401 : 503)
    return err
  }
  assert.fail(`expected a ${kind} VerifierError, got an answer`)
}

forEachBackend(httpBackends, 'verifier client against the running service', (ctx) => {
  let t: TestApp
  let svc: ServedService
  // The verifier reads the service's test clock, so moving it ages both the cache and the tokens.
  const verifier = (opts: Partial<VerifierOptions> = {}) =>
    createVerifier({ baseUrl: svc.baseUrl, timeoutMs: 2000, now: () => t.clock.now(), ...opts })

  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    svc = await serve(t)
  })

  test('a valid answer is reused within 60 s without asking, and asked for again after', async () => {
    const v = verifier()
    const { access_token } = await login(t, 'ev1@example.com')
    const before = svc.verifyCalls()
    const claims = await v.verify(access_token)
    assert.equal(claims.role, 'admin')
    assert.deepEqual(claims.permissions && Object.keys(claims.permissions), ['1'])
    assert.equal(svc.verifyCalls(), before + 1)
    t.clock.advance(59_000)
    assert.deepEqual(await v.verify(access_token), claims)
    assert.equal(svc.verifyCalls(), before + 1, 'the second call within 60 s reached the service')
    t.clock.advance(2_000)
    assert.deepEqual(await v.verify(access_token), claims)
    assert.equal(svc.verifyCalls(), before + 2, 'the cached answer outlived 60 s')
  })

  test("the scanner's verifier trusts a revoked offline token for a minute: an offline token's answer is reused for 1 s at most", async () => {
    const mac = 'AA:BB:CC:DD:EE:71'
    const key = 'wbd_verifier-offline-cache-key-0123'
    await t.seed({
      devices: [{ dev_mac: mac, event_id: 1, operator_email: 'op@example.com', device_key: key }],
    })
    const res = await t.request({
      method: 'POST',
      url: '/auth/login/device',
      payload: { dev_mac: mac, event_id: 1, device_key: key },
    })
    assert.equal(res.statusCode, 200, res.body)
    const offline = res.json().offline_token as string
    const v = verifier()
    const before = svc.verifyCalls()
    assert.equal((await v.verify(offline)).type, 'offline')
    assert.equal((await v.verify(offline)).type, 'offline')
    assert.equal(svc.verifyCalls(), before + 1, 'reused within the second')
    // The scanner is reported lost: an administrator ends its tokens.
    const deviceId = res.json().offline_token && (await v.verify(offline)).device_id
    const admin = (await login(t, 'ev1@example.com')).access_token
    const revoked = await t.request({ method: 'POST', url: `/devices/${deviceId}/revoke`, token: admin })
    assert.equal(revoked.statusCode, 200, revoked.body)
    t.clock.advance(1_001)
    await refused(v.verify(offline), 'invalid')
    // An access token keeps the 60 s of the specification.
    const { access_token } = await login(t, 'ev1@example.com')
    const calls = svc.verifyCalls()
    await v.verify(access_token)
    t.clock.advance(30_000)
    await v.verify(access_token)
    assert.equal(svc.verifyCalls(), calls + 1)
  })

  test('a cached answer never outlives the token’s own exp', async () => {
    const v = verifier()
    const { access_token } = await login(t, 'ev1@example.com')
    t.clock.advance(15 * 60_000 - 30_000) // 30 s of the 15-minute lifetime left
    await v.verify(access_token)
    t.clock.advance(31_000)
    await refused(v.verify(access_token), 'invalid')
  })

  test('the claims handed out are frozen, so one request cannot change what the next one is granted', async () => {
    const v = verifier()
    const { access_token } = await login(t, 'op@example.com', 'operator')
    const claims = await v.verify(access_token)
    assert.throws(() => claims.permissions!['1']!.push('pos:refund'), TypeError)
    assert.throws(() => {
      claims.role = 'admin'
    }, TypeError)
    assert.deepEqual((await v.verify(access_token)).permissions, { '1': ['pos:sell', 'ticket:scan'] })
  })

  test('an invalid token is refused as 401, asked about once and then answered from the cache', async () => {
    const v = verifier()
    const { access_token } = await login(t, 'ev1@example.com')
    const tampered = `${access_token.slice(0, -4)}AAAA`
    const before = svc.verifyCalls()
    for (let i = 0; i < 3; i++) await refused(v.verify(tampered), 'invalid')
    assert.equal(svc.verifyCalls(), before + 1)
    t.clock.advance(61_000)
    await refused(v.verify(tampered), 'invalid')
    assert.equal(svc.verifyCalls(), before + 2, 'a refusal is remembered for 60 s, not longer')
  })

  test('malformed, overlong and expired tokens are refused without asking', async () => {
    const v = verifier()
    const { access_token } = await login(t, 'ev1@example.com')
    const [header, payload, signature] = access_token.split('.') as [string, string, string]
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString())
    const expired = Buffer.from(JSON.stringify({ ...claims, exp: claims.iat - 1 })).toString('base64url')
    const before = svc.verifyCalls()
    for (const token of [
      'not-a-token',
      'a'.repeat(9000),
      `${header}.${payload}`,
      `${header}.${payload}.${signature}.x`,
      `${header}.${payload}.sig+nature`,
      `bm90IGpzb24.${payload}.${signature}`,
      `${header}.${expired}.${signature}`,
      'wb_short',
    ])
      await refused(v.verify(token), 'invalid')
    assert.equal(svc.verifyCalls(), before)
    assert.equal((await v.verify(access_token)).type, 'access')
    assert.equal(svc.verifyCalls(), before + 1)
  })

  test('an empty token is refused without asking', async () => {
    const before = svc.verifyCalls()
    await refused(verifier().verify(''), 'invalid')
    assert.equal(svc.verifyCalls(), before)
  })

  test('a rotated (revoked) refresh token is refused once its cache entry lapses', async () => {
    const v = verifier()
    const { refresh_token } = await login(t, 'ev1@example.com')
    assert.equal((await v.verify(refresh_token)).type, 'refresh')
    const rotated = await t.request({ method: 'POST', url: '/auth/refresh', payload: { refresh_token } })
    assert.equal(rotated.statusCode, 200)
    // Within the window the cached answer stands: the 60 s staleness the spec allows callers.
    assert.equal((await v.verify(refresh_token)).type, 'refresh')
    t.clock.advance(61_000)
    await refused(v.verify(refresh_token), 'invalid')
  })

  test('a revoked API key is refused once its cache entry lapses', async () => {
    const v = verifier()
    const { record, plaintext } = await createApiKey(t.db.db, {
      event_id: 1,
      name: 'gate scanner',
      scopes: ['api:read'],
      created_by: null,
      now: t.clock.now(),
    })
    const claims = await v.verify(plaintext)
    assert.equal(claims.role, 'event_client')
    assert.deepEqual(claims.permissions, { '1': ['api:read'] })
    assert.equal(await revokeApiKey(t.db.db, record.id, t.clock.now()), true)
    assert.deepEqual(await v.verify(plaintext), claims)
    t.clock.advance(61_000)
    await refused(v.verify(plaintext), 'invalid')
  })

  test('concurrent verifications of one token make one request', async () => {
    const v = verifier()
    const { access_token } = await login(t, 'op@example.com', 'operator')
    const before = svc.verifyCalls()
    const answers = await Promise.all(Array.from({ length: 25 }, () => v.verify(access_token)))
    assert.equal(svc.verifyCalls(), before + 1)
    for (const claims of answers) assert.deepEqual(claims, answers[0])
  })

  test('concurrent verifications of an invalid token share one request and its refusal', async () => {
    const v = verifier()
    const { access_token } = await login(t, 'ev1@example.com')
    const forged = `${access_token.slice(0, -4)}BBBB`
    const before = svc.verifyCalls()
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => v.verify(forged)))
    assert.ok(
      outcomes.every((o) => o.status === 'rejected' && (o.reason as VerifierError).kind === 'invalid'),
    )
    assert.equal(svc.verifyCalls(), before + 1)
    await refused(v.verify(forged), 'invalid')
    assert.equal(svc.verifyCalls(), before + 1)
  })

  test('refusals have a cache of their own: junk tokens do not push valid answers out', async () => {
    const v = verifier({ maxEntries: 2 })
    const { access_token } = await login(t, 'ev1@example.com')
    await v.verify(access_token)
    const before = svc.verifyCalls()
    for (let i = 0; i < 5; i++) await refused(v.verify(`${access_token.slice(0, -4)}${i}AAA`), 'invalid')
    await v.verify(access_token)
    assert.equal(svc.verifyCalls(), before + 5)
  })

  test('the cache holds at most maxEntries answers, dropping the least recently used', async () => {
    const v = verifier({ maxEntries: 2 })
    const a = (await login(t, 'ev1@example.com')).access_token
    const b = (await login(t, 'root@example.com')).access_token
    const c = (await login(t, 'nm@example.com', 'network_manager')).access_token
    const before = svc.verifyCalls()
    await v.verify(a)
    await v.verify(b)
    await v.verify(a) // a is now the most recently used
    await v.verify(c) // evicts b
    assert.equal(svc.verifyCalls(), before + 3)
    await v.verify(a)
    await v.verify(c)
    assert.equal(svc.verifyCalls(), before + 3)
    await v.verify(b)
    assert.equal(svc.verifyCalls(), before + 4)
  })

  test('cacheTtlSeconds 0 asks every time', async () => {
    const v = verifier({ cacheTtlSeconds: 0 })
    const { access_token } = await login(t, 'ev1@example.com')
    const before = svc.verifyCalls()
    await v.verify(access_token)
    await v.verify(access_token)
    assert.equal(svc.verifyCalls(), before + 2)
  })
})

forEachBackend(httpBackends, 'verifier under the service’s rate limit', (ctx) => {
  let t: TestApp
  let svc: ServedService
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    svc = await serve(t)
  })

  test('on a 429 cached answers keep being served and a new check retries with back-off', async () => {
    const waits: number[] = []
    // The verifier's waits, recorded and not slept: the test clock stands still meanwhile.
    const sleep = async (ms: number) => {
      waits.push(ms)
    }
    t.clock.freeze()
    const v = createVerifier({ baseUrl: svc.baseUrl, timeoutMs: 2000, now: () => t.clock.now(), sleep })
    const cached = (await login(t, 'ev1@example.com')).access_token
    const fresh = (await login(t, 'root@example.com')).access_token
    await v.verify(cached)
    // Forged tokens (well-formed, wrong signature) spend the anonymous budget of this address.
    for (let i = 0; i < 599; i++)
      await refused(v.verify(`${cached.slice(0, -6)}${String(i).padStart(6, 'A')}`), 'invalid')
    const calls = svc.verifyCalls()
    assert.equal((await v.verify(cached)).type, 'access', 'a cached answer needs no budget')
    assert.equal(svc.verifyCalls(), calls)
    // A new check meets 429s: it waits longer each time and asks again, until its budget is spent.
    const err = await refused(v.verify(fresh), 'unavailable')
    assert.ok(
      err.retryAfterSeconds !== undefined && err.retryAfterSeconds >= 1 && err.retryAfterSeconds <= 60,
    )
    assert.ok(waits.length >= 2, `retried ${waits.length} times`)
    assert.equal(svc.verifyCalls(), calls + waits.length + 1)
    assert.ok(waits.reduce((a, b) => a + b, 0) <= 2000, 'within retryBudgetMs')
    for (let i = 1; i < waits.length; i++) assert.ok(waits[i]! > waits[i - 1]! / 2, 'the back-off grows')
    assert.equal((await v.verify(cached)).type, 'access', 'cached answers are still served')
    t.clock.thaw()
  })

  test('a service of the release before (api_key refused, 422) still answers: the check goes anonymous', async () => {
    const { access_token } = await login(t, 'ev1@example.com')
    let refused422 = 0
    // The release before's schema refuses the unknown property; this one's route is asked otherwise.
    const releaseBefore: typeof fetch = async (input, init) => {
      if (String(init?.body).includes('"api_key"')) {
        refused422++
        return new Response('{"detail":[]}', { status: 422 })
      }
      return fetch(input, { ...init, headers: { ...init?.headers, 'x-forwarded-for': '198.51.100.78' } })
    }
    const v = createVerifier({
      baseUrl: svc.baseUrl,
      credential: `wb_${'c'.repeat(43)}`,
      fetch: releaseBefore,
    })
    assert.equal((await v.verify(access_token)).type, 'access')
    const other = (await login(t, 'root@example.com')).access_token
    assert.equal((await v.verify(other)).type, 'access')
    assert.equal(refused422, 1, 'the credential is left out for a while after one refusal')
  })

  test('a check that meets a 429 answers once the service does again', async () => {
    const { access_token } = await login(t, 'ev1@example.com')
    // Two 429s (as a limited service answers), then the requests go through to the service (as a
    // client of its own: the test before spent this host's budget).
    let refusals = 2
    const limitedTwice: typeof fetch = async (input, init) =>
      refusals-- > 0
        ? new Response('{"detail":"limited","error":"rate_limit_exceeded"}', {
            status: 429,
            headers: { 'retry-after': '30' },
          })
        : fetch(input, { ...init, headers: { ...init?.headers, 'x-forwarded-for': '198.51.100.77' } })
    const waits: number[] = []
    const v = createVerifier({
      baseUrl: svc.baseUrl,
      fetch: limitedTwice,
      sleep: async (ms) => {
        waits.push(ms)
      },
    })
    const before = svc.verifyCalls()
    assert.equal((await v.verify(access_token)).type, 'access')
    assert.equal(waits.length, 2)
    assert.equal(svc.verifyCalls(), before + 1)
  })
})

forEachBackend(httpBackends, 'verifier with the service stopped', (ctx) => {
  test('verify answers unavailable (503), never anything else', async () => {
    const t = ctx()
    await t.seed(STANDARD_SEED)
    const svc = await serve(t)
    const { access_token } = await login(t, 'ev1@example.com')
    await t.app.close()
    const err = await refused(
      createVerifier({ baseUrl: svc.baseUrl, timeoutMs: 2000 }).verify(access_token),
      'unavailable',
    )
    assert.equal(err.retryAfterSeconds, undefined)
  })
})

test('a service that accepts but never answers is unavailable after timeoutMs', async () => {
  const held: net.Socket[] = []
  const server = net.createServer((socket) => held.push(socket)).listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  const { port } = server.address() as net.AddressInfo
  try {
    const err = await refused(
      // A well-formed token (a JWS of `{"alg":"HS256"}` and `{"sub":"1"}`), which only the service can refuse.
      createVerifier({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 150 }).verify(
        'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl',
      ),
      'unavailable',
    )
    assert.match(err.message, /timed out/)
  } finally {
    for (const s of held) s.destroy()
    server.close()
  }
})

test('options outside the documented bounds are refused at creation', () => {
  const baseUrl = 'http://127.0.0.1:1'
  assert.throws(() => createVerifier({ baseUrl, cacheTtlSeconds: 61 }), RangeError)
  assert.throws(() => createVerifier({ baseUrl, cacheTtlSeconds: -1 }), RangeError)
  assert.throws(() => createVerifier({ baseUrl, maxEntries: 0 }), RangeError)
  assert.throws(() => createVerifier({ baseUrl, timeoutMs: 0 }), RangeError)
  assert.throws(() => createVerifier({ baseUrl: 'not a url' }), TypeError)
  assert.throws(() => createVerifier({ baseUrl, retryBudgetMs: -1 }), RangeError)
  assert.throws(() => createVerifier({ baseUrl, credential: 'not a key' }), TypeError)
})
