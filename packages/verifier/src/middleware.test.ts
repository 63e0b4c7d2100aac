import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { forEachBackend, login, STANDARD_SEED, type TestApp } from '../../../test/helpers/app.js'
import { httpBackends } from '../../../test/helpers/backends.js'
import { type Backend, get, type ServedService, serve, startBackends } from './test-support.js'
import { createVerifier } from './verifier.js'

async function assertRefused(res: Response, status: number, detail: string): Promise<void> {
  assert.equal(res.status, status)
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/)
  assert.deepEqual(await res.json(), { detail })
  if (status === 401) assert.equal(res.headers.get('www-authenticate'), 'Bearer')
  else assert.equal(res.headers.get('www-authenticate'), null)
}

forEachBackend(httpBackends, 'Fastify and Express guards in front of a backend', (ctx) => {
  let t: TestApp
  let svc: ServedService
  let backends: Backend[]

  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    svc = await serve(t)
    backends = await startBackends(
      createVerifier({ baseUrl: svc.baseUrl, timeoutMs: 2000, now: () => t.clock.now() }),
    )
  })
  after(async () => {
    for (const b of backends ?? []) await b.close()
  })

  for (const kind of ['fastify', 'express'] as const) {
    describe(kind, () => {
      const backend = () => backends.find((b) => b.name === kind)!

      test('a valid token passes, and the second call within 60 s asks the service nothing', async () => {
        const { access_token } = await login(t, 'ev1@example.com')
        const before = svc.verifyCalls()
        const first = await get(backend(), '/me', access_token)
        assert.equal(first.status, 200)
        assert.equal(typeof ((await first.json()) as { sub: unknown }).sub, 'string')
        assert.equal(svc.verifyCalls(), before + 1)
        t.clock.advance(30_000)
        assert.equal((await get(backend(), '/me', access_token)).status, 200)
        assert.equal(svc.verifyCalls(), before + 1)
      })

      test('no or a malformed Authorization header is 401 without asking the service', async () => {
        const before = svc.verifyCalls()
        await assertRefused(await get(backend(), '/me'), 401, 'Could not validate credentials')
        const basic = await fetch(`${backend().url}/me`, { headers: { authorization: 'Basic dXNlcjpwdw==' } })
        await assertRefused(basic, 401, 'Could not validate credentials')
        assert.equal(svc.verifyCalls(), before)
      })

      test('an invalid token is 401: a forged one is checked once, a malformed one never', async () => {
        const { access_token } = await login(t, 'ev1@example.com')
        const forged = `${access_token.slice(0, -4)}AAAA`
        const before = svc.verifyCalls()
        for (let i = 0; i < 3; i++)
          for (const token of [forged, 'forged.token.value'])
            await assertRefused(await get(backend(), '/me', token), 401, 'Could not validate credentials')
        assert.equal(svc.verifyCalls(), before + 1)
      })

      test('scopes are checked for the event the route names', async () => {
        const op = (await login(t, 'op@example.com', 'operator')).access_token // event 1: pos:sell, ticket:scan
        const scanned = await get(backend(), '/events/1/scan', op)
        assert.equal(scanned.status, 200)
        assert.ok(((await scanned.json()) as { scanned_by?: string }).scanned_by)
        await assertRefused(await get(backend(), '/events/2/scan', op), 403, 'Not enough permissions')
        await assertRefused(await get(backend(), '/events/1/refund', op), 403, 'Not enough permissions')
        await assertRefused(await get(backend(), '/reports', op), 403, 'Not enough permissions')
      })

      test('a "*" grant reaches every event; an event-bound one does not satisfy an all-events route', async () => {
        const root = (await login(t, 'root@example.com')).access_token // superadmin: "*"
        const ev1 = (await login(t, 'ev1@example.com')).access_token // admin of event 1 only
        assert.equal((await get(backend(), '/reports', root)).status, 200)
        await assertRefused(await get(backend(), '/reports', ev1), 403, 'Not enough permissions')
      })

      test('an invalid token is 401 before any scope check', async () => {
        await assertRefused(
          await get(backend(), '/events/2/scan', 'forged.token.value'),
          401,
          'Could not validate credentials',
        )
      })

      test('concurrent requests with one token make one request to the service', async () => {
        const { access_token } = await login(t, 'op@example.com', 'operator')
        const before = svc.verifyCalls()
        const answers = await Promise.all(
          Array.from({ length: 20 }, () => get(backend(), '/events/1/scan', access_token)),
        )
        assert.deepEqual(
          answers.map((r) => r.status),
          answers.map(() => 200),
        )
        assert.equal(svc.verifyCalls(), before + 1)
      })
    })
  }
})

forEachBackend(httpBackends, 'Fastify guard as an onRequest hook', (ctx) => {
  test('a bad token is 401 before the body is validated; a good one reaches validation', async () => {
    const t = ctx()
    await t.seed(STANDARD_SEED)
    const svc = await serve(t)
    const backends = await startBackends(createVerifier({ baseUrl: svc.baseUrl, timeoutMs: 2000 }))
    const fastify = backends.find((b) => b.name === 'fastify')
    try {
      const op = (await login(t, 'op@example.com', 'operator')).access_token
      const post = (token: string, body: unknown) =>
        fetch(`${fastify!.url}/events/1/scans`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        })
      await assertRefused(
        await post('forged.token.value', { bogus: 1 }),
        401,
        'Could not validate credentials',
      )
      assert.equal((await post(op, { bogus: 1 })).status, 400)
      assert.equal((await post(op, { ticket: 'T-1' })).status, 200)
    } finally {
      for (const b of backends) await b.close()
    }
  })
})

forEachBackend(httpBackends, 'guards with the auth service stopped', (ctx) => {
  test('the backend answers 503 with a JSON body, not 500; answers already cached still pass', async () => {
    const t = ctx()
    await t.seed(STANDARD_SEED)
    const svc = await serve(t)
    const backends = await startBackends(
      createVerifier({ baseUrl: svc.baseUrl, timeoutMs: 2000, now: () => t.clock.now() }),
    )
    try {
      const seen = (await login(t, 'ev1@example.com')).access_token
      const unseen = (await login(t, 'root@example.com')).access_token
      for (const b of backends) assert.equal((await get(b, '/me', seen)).status, 200, b.name)
      await t.app.close()
      for (const b of backends) {
        await assertRefused(await get(b, '/me', unseen), 503, 'Authentication service unavailable')
        assert.equal((await get(b, '/me', seen)).status, 200, b.name)
      }
    } finally {
      for (const b of backends) await b.close()
    }
  })
})
