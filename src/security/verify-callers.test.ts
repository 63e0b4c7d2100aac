import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { type Backend, get, startBackends } from '../../packages/verifier/src/test-support.js'
import { createVerifier } from '../../packages/verifier/src/verifier.js'
import { login, STANDARD_SEED, startApp, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'

/**
 * POST /tokens/verify allowed 600 requests a minute per client address, and the
 * client is the backend that verifies for its users. About ten junk tokens a second sent to any
 * protected backend spent its budget (invalid answers were never cached), and after one 429
 * @wristband/verifier answered 503 to every user. Backends now identify themselves with a verify
 * credential (an API key with scope tokens:verify, sent as `api_key`) and are limited per credential
 * (VERIFY_CLIENT_RATE_LIMIT a minute); the SDK caches refusals, refuses malformed and expired tokens
 * without a request, and retries a 429 with back-off while it serves its cache.
 */

/** Creates an API key through the API, as an event administrator would. */
async function apiKey(t: TestApp, admin: string, name: string, scopes: string[]) {
  const res = await t.request({
    method: 'POST',
    url: '/tokens/api-key',
    token: admin,
    payload: { event_id: 1, name, scopes },
  })
  assert.equal(res.statusCode, 200, res.body)
  return res.json() as { id: number; api_key: string }
}

/** A fetch that presents every request as coming from `address` (the test's peer is a trusted proxy). */
const from =
  (address: string): typeof fetch =>
  (input, init) =>
    fetch(input, { ...init, headers: { ...init?.headers, 'x-forwarded-for': address } })

eachBackend(httpBackends, 'verify callers', (backend) => {
  let p: ProvisionedBackend
  let t: TestApp
  let base: string
  let admin: string
  before(async () => {
    p = await backend.provision()
    t = await startApp(backend, { VERIFY_CLIENT_RATE_LIMIT: '20' }, p)
    await t.seed(STANDARD_SEED)
    await t.app.listen({ host: '127.0.0.1', port: 0 })
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`
    admin = (await login(t, 'ev1@example.com')).access_token
  })
  after(async () => {
    await t?.close()
    await p?.dispose()
  })

  // Through the lane (a socket, the compact body) and through Fastify (inject): one budget.
  const viaLane = (token: string, apiKey: string | undefined, address: string) =>
    fetch(`${base}/tokens/verify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': address },
      body: JSON.stringify(apiKey === undefined ? { token } : { token, api_key: apiKey }),
    }).then(async (r) => ({
      status: r.status,
      limit: r.headers.get('x-ratelimit-limit'),
      remaining: r.headers.get('x-ratelimit-remaining'),
      body: (await r.json()) as Record<string, unknown>,
    }))
  const viaRoute = (token: string, apiKey: string | undefined, address: string) =>
    t
      .request({
        method: 'POST',
        url: '/tokens/verify',
        headers: { 'x-forwarded-for': address },
        payload: apiKey === undefined ? { token } : { token, api_key: apiKey },
      })
      .then((r) => ({
        status: r.statusCode,
        limit: r.headers['x-ratelimit-limit'] ?? null,
        remaining: r.headers['x-ratelimit-remaining'] ?? null,
        body: r.json() as Record<string, unknown>,
      }))

  test('junk tokens through a backend do not lock its users out', async () => {
    const user = (await login(t, 'op@example.com', 'operator')).access_token
    // The attacker's junk: tokens of the right shape with a wrong signature (each reaches the
    // service once), the same ones again, and strings that are no token at all.
    const forged = Array.from({ length: 650 }, (_, i) => `${user.slice(0, -6)}${String(i).padStart(6, 'A')}`)
    const junk = [...forged, ...forged.slice(0, 50), 'junk', 'a.b.c', '{}', 'x'.repeat(9000)]
    const attack = async (guarded: Backend) => {
      for (const token of junk) assert.equal((await get(guarded, '/me', token)).status, 401)
    }

    // Without a credential the backend's address is the budget: the attack locks its users out.
    const anonymous = createVerifier({ baseUrl: base, fetch: from('198.51.100.1'), retryBudgetMs: 0 })
    const exposedBoth = await startBackends(anonymous)
    const exposed = exposedBoth[0]
    try {
      for (const token of forged) await get(exposed!, '/me', token)
      assert.equal((await get(exposed!, '/me', user)).status, 503, 'the attack works without a credential')
    } finally {
      for (const b of exposedBoth) await b.close()
    }

    // With one, the junk spends the credential's own budget (60,000 a minute by default; here the
    // instance is set to 20 for the next test, so this backend gets an instance of its own).
    const q = await backend.provision()
    const fleet = await startApp(backend, {}, q)
    try {
      await fleet.seed(STANDARD_SEED)
      await fleet.app.listen({ host: '127.0.0.1', port: 0 })
      const url = `http://127.0.0.1:${(fleet.app.server.address() as AddressInfo).port}`
      const fleetAdmin = (await login(fleet, 'ev1@example.com')).access_token
      const key = (await apiKey(fleet, fleetAdmin, 'ticketing backend', ['tokens:verify'])).api_key
      const fleetUser = (await login(fleet, 'op@example.com', 'operator')).access_token
      const verifier = createVerifier({ baseUrl: url, credential: key, fetch: from('198.51.100.2') })
      const protectedBoth = await startBackends(verifier)
      const protectedBackend = protectedBoth[0]
      try {
        await attack(protectedBackend!)
        const res = await get(protectedBackend!, '/me', fleetUser)
        assert.equal(res.status, 200, 'a user gets in after the attack')
        // And the backend's address kept its anonymous budget: its checks counted on the credential,
        // the first (which looked the credential up) included.
        const anon = await fetch(`${url}/tokens/verify`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-forwarded-for': '198.51.100.2' },
          body: JSON.stringify({ token: 'x' }),
        })
        assert.equal(anon.headers.get('x-ratelimit-remaining'), '599')
      } finally {
        for (const b of protectedBoth) await b.close()
      }
    } finally {
      await fleet.close()
      await q.dispose()
    }
  })

  test('a verify credential has its own budget', async () => {
    t.clock.freeze()
    const token = (await login(t, 'ev1@example.com')).access_token
    const one = await apiKey(t, admin, 'backend one', ['tokens:verify'])
    const two = await apiKey(t, admin, 'backend two', ['tokens:verify'])
    const partnerKey = await apiKey(t, admin, 'partner', ['api:read'])
    const lane = (key: string | undefined, address: string) => viaLane(token, key, address)
    const route = (key: string | undefined, address: string) => viaRoute(token, key, address)
    const A = '198.51.100.10'
    for (let i = 1; i <= 20; i++) {
      const res = await (i % 2 ? lane : route)(one.api_key, A)
      assert.equal(res.status, 200, `request ${i}`)
      assert.equal(res.body.valid, true)
      assert.deepEqual([res.limit, res.remaining], ['20', String(20 - i)], `request ${i}`)
    }
    for (const send of [lane, route]) {
      const over = await send(one.api_key, A)
      assert.equal(over.status, 429)
      assert.equal(over.body.error, 'rate_limit_exceeded')
      assert.equal(over.body.limit, 20)
      // The credential's budget, wherever it calls from.
      assert.equal((await send(one.api_key, '198.51.100.11')).status, 429)
    }
    // The address's anonymous budget and another credential's are untouched (the credential's first
    // request, which looked it up, included).
    assert.deepEqual(
      [(await lane(undefined, A)).remaining, (await route(undefined, A)).remaining],
      ['599', '598'],
    )
    const second = await lane(two.api_key, A)
    assert.deepEqual([second.status, second.limit, second.remaining], [200, '20', '19'])
    // A key without tokens:verify, a made-up key and a revoked credential count as anonymous.
    assert.deepEqual(
      [(await lane(partnerKey.api_key, A)).limit, (await lane('wb_madeup', A)).limit],
      ['600', '600'],
    )
    const revoked = await t.request({ method: 'DELETE', url: `/tokens/api-key/${two.id}`, token: admin })
    assert.equal(revoked.statusCode, 200)
    for (const send of [lane, route]) assert.equal((await send(two.api_key, A)).limit, '600')
    t.clock.thaw()
  })
  test('a live credential is never refused because its address spent the anonymous budget, its first call included', async () => {
    t.clock.freeze()
    const token = (await login(t, 'ev1@example.com')).access_token
    // Two credentials this instance has never seen: one for the lane, one for the route.
    const forLane = await apiKey(t, admin, 'backend behind a shared address (lane)', ['tokens:verify'])
    const forRoute = await apiKey(t, admin, 'backend behind a shared address (route)', ['tokens:verify'])
    const A = '198.51.100.20'
    for (let i = 1; i <= 600; i++)
      assert.equal((await viaRoute(token, undefined, A)).status, 200, `request ${i}`)
    for (const send of [viaLane, viaRoute]) assert.equal((await send(token, undefined, A)).status, 429)

    const first = await viaLane(token, forLane.api_key, A)
    assert.deepEqual([first.status, first.body.valid, first.limit, first.remaining], [200, true, '20', '19'])
    const firstRoute = await viaRoute(token, forRoute.api_key, A)
    assert.deepEqual(
      [firstRoute.status, firstRoute.body.valid, firstRoute.limit, firstRoute.remaining],
      [200, true, '20', '19'],
    )
    // Made-up keys still cost the address, which has nothing left.
    for (const send of [viaLane, viaRoute]) {
      const madeUp = await send(token, `wb_${randomBytes(32).toString('base64url')}`, A)
      assert.deepEqual([madeUp.status, madeUp.body.limit], [429, 600])
    }
    t.clock.thaw()
  })
})
