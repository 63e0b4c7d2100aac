import assert from 'node:assert/strict'
import type { ChildProcess } from 'node:child_process'
import { after, before, describe, test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { forEachBackend, startApp, type TestApp } from '../../test/helpers/app.js'
import { backends, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import {
  freePort,
  killProcess,
  redisServerInstalled,
  startRedisServer,
} from '../../test/helpers/processes.js'
import { sample } from '../../test/helpers/scrape.js'
import { relayedDatabase, type TcpRelay } from '../../test/helpers/tcp-relay.js'
import { waitFor } from '../../test/helpers/until.js'

const METRICS_TOKEN = 'scrape-token-0123456789abcdef'

/** Asks /ready until it gives `status` (reconnects take a moment). */
function readyUntil(t: TestApp, status: number): Promise<LightMyRequestResponse> {
  return waitFor(
    async () => {
      const res = await t.request({ method: 'GET', url: '/ready' })
      return res.statusCode === status && res
    },
    10_000,
    `/ready to answer ${status}`,
  )
}

forEachBackend(httpBackends, 'GET /ready', (ctx) => {
  test('200 with the state of each dependency', async () => {
    const t = ctx()
    const res = await t.request({ method: 'GET', url: '/ready' })
    assert.equal(res.statusCode, 200)
    const body = res.json()
    assert.equal(body.status, 'ready')
    assert.equal(body.checks.database.status, 'up')
    assert.deepEqual(body.checks.database.pending_migrations, [])
    assert.equal(body.checks.redis.status, t.config.REDIS_URL ? 'up' : 'not_configured')
    assert.equal((await t.request({ method: 'GET', url: '/health' })).json().status, 'ok')
    const live = await t.request({ method: 'GET', url: '/live' })
    assert.equal(live.statusCode, 200)
    assert.deepEqual(live.json(), { status: 'ok' })
  })

  test('503 while a migration is pending (a restored older backup), 200 once it is applied', async () => {
    const t = ctx()
    const db = t.db.db
    const last = await db
      .selectFrom('kysely_migration' as never)
      .selectAll()
      .orderBy('name' as never, 'desc')
      .executeTakeFirstOrThrow()
    await db
      .deleteFrom('kysely_migration' as never)
      .where('name' as never, '=', (last as { name: string }).name as never)
      .execute()
    try {
      const res = await t.request({ method: 'GET', url: '/ready' })
      assert.equal(res.statusCode, 503)
      const body = res.json()
      assert.equal(body.status, 'unavailable')
      assert.equal(body.checks.database.reason, 'migrations_pending')
      assert.deepEqual(body.checks.database.pending_migrations, [(last as { name: string }).name])
    } finally {
      await db
        .insertInto('kysely_migration' as never)
        .values(last as never)
        .execute()
    }
    assert.equal((await t.request({ method: 'GET', url: '/ready' })).statusCode, 200)
  })
})

describe('GET /ready follows Redis going away and coming back', {
  skip: redisServerInstalled ? false : 'redis-server is not installed',
}, () => {
  let port: number
  let redis: ChildProcess | undefined
  let t: TestApp

  async function startRedis() {
    redis = await startRedisServer(port)
  }
  async function stopRedis() {
    if (redis) await killProcess(redis)
  }

  before(async () => {
    port = await freePort()
    await startRedis()
    t = await startApp(backends[0]!, { REDIS_URL: `redis://127.0.0.1:${port}`, METRICS_TOKEN })
  })
  after(async () => {
    await t?.close()
    await stopRedis()
  })

  test('Redis down is degraded, not unready: 200 naming Redis in the body and the metric; ready when back', async () => {
    const before = await t.request({ method: 'GET', url: '/ready' })
    assert.equal(before.statusCode, 200)
    assert.equal(before.json().status, 'ready')
    await stopRedis()
    // A balancer that took every instance out over Redis would take the whole service down with it.
    const down = await waitFor(
      async () => {
        const res = await t.request({ method: 'GET', url: '/ready' })
        return res.json().checks.redis.status === 'down' && res
      },
      10_000,
      '/ready to see Redis down',
    )
    assert.equal(down.statusCode, 200)
    assert.equal(down.json().status, 'degraded')
    assert.equal(down.json().checks.database.status, 'up')
    const scraped = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
    assert.equal(sample(scraped.body, 'wristband_dependency_up', { dependency: 'redis' }), 0)
    assert.equal(sample(scraped.body, 'wristband_dependency_up', { dependency: 'database' }), 1)
    // The service itself keeps answering: rate limits fail open, revocations come from the database.
    assert.equal((await t.request({ method: 'GET', url: '/health' })).statusCode, 200)
    // The client reports each failed reconnection; the first comes after its first back-off.
    const errors = await waitFor(
      async () => {
        const metrics = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
        const counted = sample(metrics.body, 'wristband_redis_errors_total')
        return counted > 0 && counted
      },
      5000,
      'redis errors to be counted',
    )
    assert.ok(errors > 0, 'redis errors were not counted')
    await startRedis()
    const up = await waitFor(
      async () => {
        const res = await t.request({ method: 'GET', url: '/ready' })
        return res.json().status === 'ready' && res
      },
      10_000,
      '/ready to see Redis back',
    )
    assert.equal(up.statusCode, 200)
    assert.equal(up.json().checks.redis.status, 'up')
    const again = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
    assert.equal(sample(again.body, 'wristband_dependency_up', { dependency: 'redis' }), 1)
  })
})

const postgres = httpBackends.find((b) => b.name.startsWith('postgres'))!

describe('GET /ready follows PostgreSQL going away and coming back', {
  ...(postgres.skip ? { skip: postgres.skip } : {}),
}, () => {
  let proxy: TcpRelay
  let provisioned: ProvisionedBackend
  let t: TestApp

  before(async () => {
    provisioned = await postgres.provision()
    const relayed = await relayedDatabase(provisioned.env.DATABASE_URL!)
    proxy = relayed.relay
    t = await startApp(postgres, { DATABASE_URL: relayed.url, METRICS_TOKEN }, provisioned)
  })
  after(async () => {
    await proxy?.open()
    await t?.close()
    await proxy?.cut()
    await provisioned?.dispose()
  })

  test('503 while the database is unreachable (/live still 200), 200 when it is back', async () => {
    assert.equal((await t.request({ method: 'GET', url: '/ready' })).statusCode, 200)
    const metricsBefore = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
    await proxy.cut()
    const down = await readyUntil(t, 503)
    assert.equal(down.json().checks.database.status, 'down')
    assert.equal(down.json().checks.database.dialect, 'postgres')
    assert.doesNotMatch(down.body, /127\.0\.0\.1|postgres:\/\//, 'no connection details in the answer')
    // Liveness asks no dependency: an orchestrator restarting every pod would not bring the database back.
    const live = await t.request({ method: 'GET', url: '/live' })
    assert.equal(live.statusCode, 200, live.body)
    assert.deepEqual(live.json(), { status: 'ok' })
    const metricsAfter = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
    assert.ok(
      sample(metricsAfter.body, 'wristband_db_errors_total') >
        sample(metricsBefore.body, 'wristband_db_errors_total'),
    )
    await proxy.open()
    const up = await readyUntil(t, 200)
    assert.equal(up.json().checks.database.status, 'up')
  })
})

forEachBackend(httpBackends, '/ready while draining', (ctx) => {
  test('once the instance drains, /ready answers 503 with shutting_down while other routes and /live answer', async () => {
    const t = ctx()
    assert.equal((await t.request({ method: 'GET', url: '/ready' })).statusCode, 200)
    t.app.beginDrain()
    const res = await t.request({ method: 'GET', url: '/ready' })
    assert.equal(res.statusCode, 503)
    assert.equal(res.json().status, 'unavailable')
    assert.equal(res.json().shutting_down, true)
    assert.equal((await t.request({ method: 'GET', url: '/health' })).statusCode, 200)
    assert.equal(
      (await t.request({ method: 'GET', url: '/live' })).statusCode,
      200,
      'a draining pod is not restarted',
    )
  })
})
