import assert from 'node:assert/strict'
import { test } from 'node:test'
import { login, STANDARD_SEED, startApp, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { backends, eachBackend } from '../../test/helpers/backends.js'
import { until } from '../../test/helpers/until.js'
import { REVOCATION_PAGE } from './revocations.js'
import { insertRevocations } from './revocations.store.js'

/**
 * Start-up with a long revocation list: an instance listens while it loads the list, and a
 * revoked token is refused during the load (the database, or Redis's copy, answers what the memory
 * cannot yet) and after it, including one revoked by another instance while the load runs.
 * GET /ready/verify stays 503 until the list is loaded.
 */

const revoke = (t: TestApp, token: string) =>
  t.request({ method: 'POST', url: '/oauth2/revoke', payload: { token } })

eachBackend(
  backends,
  'a starting instance answers verify correctly while it loads the revocations',
  (backend) => {
    test('refused during and after the load; /ready/verify 503 until it is done', async () => {
      const p = await backend.provision()
      let a: TestApp | undefined
      let b: TestApp | undefined
      try {
        a = await startApp(backend, {}, p)
        await a.seed(STANDARD_SEED)
        const revoked = (await login(a, 'ev1@example.com')).access_token
        const good = (await login(a, 'ev1@example.com')).access_token
        const later = (await login(a, 'root@example.com')).access_token
        assert.equal((await revoke(a, revoked)).statusCode, 200)
        // More than two pages of other revocations, so the load reads several pages.
        const now = a.clock.now()
        const others = Array.from({ length: REVOCATION_PAGE * 2 + 7 }, (_, i) => ({
          jti: `other-${i}`,
          expiresAt: now + 3_600_000,
        }))
        for (let i = 0; i < others.length; i += 1000)
          await insertRevocations(a.db.db, now, others.slice(i, i + 1000))

        // A second instance whose load is held before its first page.
        let release = () => {}
        const held = new Promise<void>((resolve) => {
          release = resolve
        })
        let pages = 0
        b = await startApp(backend, {}, p, {
          revocationLoadPace: async () => {
            await held
            pages++
          },
        })
        const bb = b
        const readyVerify = async () => (await bb.request({ method: 'GET', url: '/ready/verify' })).statusCode
        assert.equal(
          (await b.request({ method: 'GET', url: '/ready' })).statusCode,
          200,
          'ready while loading',
        )
        assert.equal(await readyVerify(), 503, 'the list is not complete yet')
        assert.deepEqual(
          await verifyToken(b, revoked),
          { valid: false, claims: null },
          'refused while loading',
        )
        assert.equal((await verifyToken(b, good)).valid, true, 'a good token is good while loading')
        assert.equal((await revoke(a, later)).statusCode, 200)
        assert.equal((await verifyToken(b, later)).valid, false, 'revoked elsewhere while loading: refused')
        assert.equal(pages, 0, 'all of that while the load was held')
        assert.equal(await readyVerify(), 503)

        release()
        await until('the list loaded', async () => (await readyVerify()) === 200)
        assert.equal(pages, 3, 'three pages')
        for (const token of [revoked, later])
          assert.deepEqual(
            await verifyToken(b, token),
            { valid: false, claims: null },
            'refused after the load',
          )
        assert.equal((await verifyToken(b, good)).valid, true)
        assert.ok(b.logs.some((l) => l.includes('revocations loaded')))
      } finally {
        await b?.close()
        await a?.close()
        await p.dispose()
      }
    })
  },
)
