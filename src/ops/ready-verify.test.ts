import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { until } from '../../test/helpers/until.js'

/**
 * GET /ready/verify: 200 while the instance's revocation list is known complete without the database
 * (the Redis feed followed, or a read of the database a few polls ago), 503 otherwise and while it
 * drains. The whole outage, with a fleet under load, is src/reliability/verify-database-outage.test.ts.
 */
forEachBackend(
  httpBackends,
  'GET /ready/verify',
  (ctx) => {
    let t: TestApp
    before(() => {
      t = ctx()
    })
    const readyVerify = () => t.request({ method: 'GET', url: '/ready/verify' })

    test('200 and fresh after start: the feed with Redis, a recent read of the database without', async () => {
      const via = t.config.REDIS_URL ? 'feed' : 'database'
      await until(
        `the revocation list vouched for by ${via}`,
        async () => {
          const res = await readyVerify()
          return res.statusCode === 200 && res.json().checks.revocations.via === via
        },
        60_000,
      )
      const body = (await readyVerify()).json()
      assert.equal(body.status, 'ready')
      assert.equal(body.checks.revocations.status, 'fresh')
      assert.equal(typeof body.checks.revocations.last_read_seconds_ago, 'number')
    })

    test('without the feed, a read of the database older than 3 polls is stale: 503', async (s) => {
      if (t.config.REDIS_URL) return s.skip('the Redis feed vouches for the list, however old the last read')
      // REVOCATION_POLL_MS is a minute here, so no read happens while the clock is moved past 3 of them.
      t.clock.advance(3 * 60_000 + 1000)
      const res = await readyVerify()
      assert.equal(res.statusCode, 503)
      assert.deepEqual(res.json().checks.revocations.status, 'stale')
      assert.deepEqual(res.json().checks.revocations.via, 'none')
    })

    // Drains the instance, so it runs last.
    test('503 with shutting_down from the moment the instance is told to stop', async () => {
      t.app.beginDrain()
      const res = await readyVerify()
      assert.equal(res.statusCode, 503)
      assert.equal(res.json().shutting_down, true)
    })
  },
  { REVOCATION_POLL_MS: '60000' },
)
