import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'
import Fastify, { type LightMyRequestResponse } from 'fastify'
import {
  forEachBackend,
  login,
  logout,
  STANDARD_SEED,
  startApp,
  type TestApp,
  withTwoInstances,
} from '../../test/helpers/app.js'
import { backends, eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { TestClock } from '../../test/helpers/clock.js'
import { assertPerMinuteLimit } from '../../test/helpers/rate-limit.js'
import { moreRedisErrors } from '../../test/helpers/scrape.js'
import { until, waitFor } from '../../test/helpers/until.js'
import { registerErrorHandler } from './error-handler.js'
import { memoryCounters, perMinute, registerRateLimit } from './rate-limit.js'

const LOGIN_LIMIT = 10

/** A cheap request to /auth/login (422, no password hashing) that still counts against the limit. */
function hit(t: TestApp, address: string): Promise<LightMyRequestResponse> {
  return t.request({
    method: 'POST',
    url: '/auth/login',
    payload: {},
    headers: { 'x-forwarded-for': address },
  })
}

async function exhaust(t: TestApp, address: string, n = LOGIN_LIMIT): Promise<void> {
  for (let i = 0; i < n; i++) assert.equal((await hit(t, address)).statusCode, 422, `request ${i + 1}`)
}

function assertLimited(res: LightMyRequestResponse, limit = LOGIN_LIMIT) {
  assert.equal(res.statusCode, 429)
  const body = res.json()
  assert.deepEqual(Object.keys(body).sort(), ['detail', 'error', 'limit', 'retry_after'])
  assert.equal(body.error, 'rate_limit_exceeded')
  assert.equal(typeof body.detail, 'string')
  assert.equal(body.limit, limit)
  assert.ok(Number.isInteger(body.retry_after) && body.retry_after >= 1 && body.retry_after <= 60)
  assert.equal(res.headers['retry-after'], String(body.retry_after))
}

forEachBackend(httpBackends, 'rate limits per address', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
  })

  test('the 11th login request of a minute from one X-Forwarded-For address is 429', async () => {
    await exhaust(t, '198.51.100.1')
    assertLimited(await hit(t, '198.51.100.1'))
    assertLimited(await hit(t, '198.51.100.1'))
  })

  test('another address is unaffected, and so is another route from the same address', async () => {
    await exhaust(t, '198.51.100.2')
    assertLimited(await hit(t, '198.51.100.2'))
    assert.equal((await hit(t, '198.51.100.3')).statusCode, 422)
    const verify = await t.request({
      method: 'POST',
      url: '/tokens/verify',
      payload: { token: 'x' },
      headers: { 'x-forwarded-for': '198.51.100.2' },
    })
    assert.equal(verify.statusCode, 200)
  })

  test('every limited answer says the limit, what is left and when the window ends', async () => {
    const first = await hit(t, '198.51.100.30')
    assert.equal(first.headers['x-ratelimit-limit'], String(LOGIN_LIMIT))
    assert.equal(first.headers['x-ratelimit-remaining'], String(LOGIN_LIMIT - 1))
    const reset = Number(first.headers['x-ratelimit-reset'])
    assert.ok(reset >= 1 && reset <= 60, `reset ${reset}`)
    assert.equal((await hit(t, '198.51.100.30')).headers['x-ratelimit-remaining'], String(LOGIN_LIMIT - 2))
  })

  test('GET and POST of one path are counted apart', async () => {
    const headers = { 'x-forwarded-for': '198.51.100.31' }
    const url = '/admin/dashboard-users'
    const remaining = async (method: 'GET' | 'POST') =>
      Number((await t.request({ method, url, headers, payload: {} })).headers['x-ratelimit-remaining'])
    const first = await remaining('GET')
    for (let i = 0; i < 3; i++) await remaining('POST')
    assert.equal(await remaining('GET'), first - 1)
  })

  test('a new window starts a minute later', async () => {
    await exhaust(t, '198.51.100.32')
    assertLimited(await hit(t, '198.51.100.32'))
    if (t.config.REDIS_URL) return // Redis keeps the window by its own clock (PEXPIRE)
    t.clock.advance(60_000)
    assert.equal((await hit(t, '198.51.100.32')).statusCode, 422)
  })

  test('POST /tokens/verify: 600 a minute, valid, revoked, invalid and malformed requests alike', async () => {
    // With Redis, verify counts in the same script call as its revocation look-up; a bad token, an
    // API key and a revoked token take the other paths.
    const pair = await login(t, 'ev1@example.com')
    const out = await logout(t, pair.access_token, pair.refresh_token)
    assert.equal(out.statusCode, 200)
    const tokens = [pair.access_token, pair.refresh_token, 'not-a-token', 'wb_not-a-key']
    let n = 0
    await assertPerMinuteLimit(t, 600, () => ({
      method: 'POST',
      url: '/tokens/verify',
      payload: { token: tokens[n++ % tokens.length] },
    }))
    // Malformed bodies count too, though the route's own code never runs for them.
    const malformed = (address: string) =>
      t.request({
        method: 'POST',
        url: '/tokens/verify',
        payload: {},
        headers: { 'x-forwarded-for': address },
      })
    for (let i = 0; i < 600; i++) assert.equal((await malformed('198.51.100.34')).statusCode, 422)
    assert.equal((await malformed('198.51.100.34')).statusCode, 429)
    const answer = await t.request({
      method: 'POST',
      url: '/tokens/verify',
      payload: { token: pair.access_token },
      headers: { 'x-forwarded-for': '198.51.100.33' },
    })
    assert.deepEqual(
      [answer.json().valid, answer.headers['x-ratelimit-limit'], answer.headers['x-ratelimit-remaining']],
      [true, '600', '599'],
    )
  })

  test('the client address is the first of an X-Forwarded-For list', async () => {
    await exhaust(t, '198.51.100.4, 10.0.0.1')
    assertLimited(await hit(t, '198.51.100.4, 10.0.0.2'))
    assertLimited(await hit(t, '198.51.100.4'))
  })

  test('an exceeded limit is audited once per address and route, not per request', async () => {
    await exhaust(t, '198.51.100.6')
    for (let i = 0; i < 3; i++) assertLimited(await hit(t, '198.51.100.6'))
    const audited = () =>
      t.db.db
        .selectFrom('audit_log')
        .select(['kind', 'detail'])
        .where('kind', '=', 'rate_limit_hit')
        .where('ip', '=', '198.51.100.6')
        .execute()
    // The audit write does not hold up the 429; wait for it to land. The later hits are dropped
    // before any write starts, so once one row is there the count is final.
    const rows = await waitFor(async () => {
      const landed = await audited()
      return landed.length > 0 && landed
    })
    assert.equal(rows.length, 1)
    assert.deepEqual(JSON.parse(String(rows[0]!.detail)), { route: '/auth/login' })
  })
})

forEachBackend(
  httpBackends.slice(0, 1),
  'TRUST_PROXY=false',
  (ctx) => {
    test('X-Forwarded-For is ignored: every request counts against the socket address', async () => {
      const t = ctx()
      for (let i = 0; i < LOGIN_LIMIT; i++)
        assert.equal((await t.request({ method: 'POST', url: '/auth/login', payload: {} })).statusCode, 422)
      assertLimited(await t.request({ method: 'POST', url: '/auth/login', payload: {} }))
    })
  },
  { TRUST_PROXY: 'false' },
)

eachBackend(
  backends.filter((b) => b.name.includes('redis')),
  'rate-limit counters shared through Redis',
  (backend) => {
    test('RATE_LIMIT_SYNC_MS=0: two instances count one address exactly together', async () => {
      await withTwoInstances(backend, { RATE_LIMIT_SYNC_MS: '0' }, async (a, b) => {
        await exhaust(a, '198.51.100.9', LOGIN_LIMIT / 2)
        await exhaust(b, '198.51.100.9', LOGIN_LIMIT / 2)
        assertLimited(await hit(a, '198.51.100.9'))
        assertLimited(await hit(b, '198.51.100.9'))
        assert.equal((await hit(b, '198.51.100.10')).statusCode, 422)
      })
    })

    // Limits of 60 a minute or less count in Redis on every request whatever RATE_LIMIT_SYNC_MS says
    // (src/security/fleet-exact-limits.test.ts); the synced counters serve higher ones, such as the
    // dashboard's statistics (120 a minute; without a token a cheap 401 that still counts).
    const STATS_LIMIT = 120
    // One still moment for both instances: synced windows are aligned to the clock (floor(now / window)).
    const freezeTogether = (a: TestApp, b: TestApp) => {
      a.clock.freeze()
      b.clock.freeze()
      b.clock.advance(a.clock.now() - b.clock.now())
    }
    const stats = (t: TestApp, address: string) =>
      t.request({ method: 'GET', url: '/events/1/stats', headers: { 'x-forwarded-for': address } })
    const admittedStats = async (t: TestApp, address: string, n: number) => {
      let ok = 0
      for (let i = 0; i < n; i++) if ((await stats(t, address)).statusCode === 401) ok++
      return ok
    }

    test('synced counters: the other instance learns the count within a sync, and refuses (polled)', async () => {
      await withTwoInstances(backend, { RATE_LIMIT_SYNC_MS: '100' }, async (a, b) => {
        freezeTogether(a, b)
        assert.equal(await admittedStats(a, '198.51.100.11', STATS_LIMIT), STATS_LIMIT)
        assertLimited(await stats(a, '198.51.100.11'), STATS_LIMIT)
        // b has counted nothing of this address; once a's counts reached Redis, b's next sync
        // brings them back with its own, and b refuses too.
        await until('the shared count reaches the other instance', async () => {
          return (await stats(b, '198.51.100.11')).statusCode === 429
        })
        assertLimited(await stats(b, '198.51.100.11'), STATS_LIMIT)
        assertLimited(await stats(a, '198.51.100.11'), STATS_LIMIT)
      })
    })

    test('the bound: with no sync in a window, each instance admits at most the limit itself', async () => {
      // A sync interval longer than the test: nothing is shared, which is the worst case of the
      // documented bound (instances × sync interval × rate): here 2 × the limit, and never more.
      await withTwoInstances(backend, { RATE_LIMIT_SYNC_MS: '60000' }, async (a, b) => {
        freezeTogether(a, b)
        const total =
          (await admittedStats(a, '198.51.100.12', STATS_LIMIT + 5)) +
          (await admittedStats(b, '198.51.100.12', STATS_LIMIT + 5))
        assert.equal(total, 2 * STATS_LIMIT)
      })
    })

    test('a limit of 60 a minute or less is exact with any RATE_LIMIT_SYNC_MS', async () => {
      await withTwoInstances(backend, { RATE_LIMIT_SYNC_MS: '60000' }, async (a, b) => {
        await exhaust(a, '198.51.100.13', LOGIN_LIMIT / 2)
        await exhaust(b, '198.51.100.13', LOGIN_LIMIT / 2)
        assertLimited(await hit(a, '198.51.100.13'))
        assertLimited(await hit(b, '198.51.100.13'))
      })
    })
  },
)

describe('Redis configured but unreachable', () => {
  test('requests go through and the outage is logged once, not per request', async () => {
    const t = await startApp(backends[0]!, { REDIS_URL: 'redis://127.0.0.1:1' })
    try {
      // Spread over several of the client's reconnection attempts, each of which fails again: a failed
      // attempt after every fifth request. The warning must still appear once.
      for (let i = 0; i < LOGIN_LIMIT + 5; i++) {
        assert.equal((await hit(t, '198.51.100.20')).statusCode, 422)
        if (i % 5 === 4) await moreRedisErrors(t, 1)
      }
      const verify = await t.request({ method: 'POST', url: '/tokens/verify', payload: { token: 'x' } })
      assert.deepEqual(verify.json(), { valid: false, claims: null })
      const warnings = t.logs.filter((l) => l.includes('redis unreachable'))
      assert.equal(warnings.length, 1, warnings.join(''))
      assert.equal(JSON.parse(warnings[0]!).level, 'warn')
    } finally {
      await t.close()
    }
  })
})

describe('in-process counters', () => {
  const count = (store: ReturnType<typeof memoryCounters>, key: string) => {
    const n = store.hit(key, 60_000)
    assert.equal(typeof n, 'number', 'in-process counters answer synchronously')
    return n as number
  }

  test('count per key within a window, and start again when it ends', () => {
    const clock = new TestClock()
    // Still, so that the time a loaded machine takes between two calls does not end the window early.
    clock.freeze()
    const store = memoryCounters(clock)
    assert.equal(count(store, 'a'), 1)
    assert.equal(count(store, 'a'), 2)
    assert.equal(count(store, 'b'), 1)
    clock.advance(59_999)
    assert.equal(count(store, 'a'), 3)
    clock.advance(1)
    assert.equal(count(store, 'a'), 1)
  })

  test('hold at most their capacity, dropping the key whose window began first', () => {
    const clock = new TestClock()
    const store = memoryCounters(clock, 3)
    for (const key of ['a', 'b', 'c']) count(store, key)
    count(store, 'a')
    assert.equal(count(store, 'd'), 1) // evicts a: its window began first
    assert.equal(count(store, 'b'), 2)
    assert.equal(count(store, 'a'), 1) // a was dropped; it starts again (and evicts b)
    assert.equal(count(store, 'b'), 1) // evicts c
    assert.equal(count(store, 'd'), 2)
  })
})

test('a flood of addresses on one route never evicts the counts of another', async () => {
  const app = Fastify()
  registerErrorHandler(app)
  const clock = new TestClock()
  registerRateLimit(app, { countersFor: () => memoryCounters(clock, 3) })
  app.post('/login', { config: perMinute(2) }, async () => ({ ok: true }))
  app.post('/verify', { config: perMinute(100) }, async () => ({ ok: true }))
  const post = (url: string, address: string) =>
    app.inject({ method: 'POST', url, remoteAddress: address }).then((r) => r.statusCode)
  try {
    assert.deepEqual([await post('/login', '192.0.2.1'), await post('/login', '192.0.2.1')], [200, 200])
    assert.equal(await post('/login', '192.0.2.1'), 429)
    // More addresses on /verify than a route's store holds.
    for (let i = 10; i < 20; i++) assert.equal(await post('/verify', `192.0.2.${i}`), 200)
    assert.equal(await post('/login', '192.0.2.1'), 429, 'the login count survived the flood')
  } finally {
    await app.close()
  }
})
