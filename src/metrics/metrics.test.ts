import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { sql } from 'kysely'
import {
  forEachBackend,
  login,
  nextAddress,
  STANDARD_SEED,
  startApp,
  type TestApp,
} from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { sample } from '../../test/helpers/scrape.js'
import { BACKOFF_POLICY } from '../platform/backoff.js'
import { ConfigError, loadConfig } from '../platform/config.js'
import { buildMetricsServer } from './metrics.routes.js'

const METRICS_TOKEN = 'scrape-token-0123456789abcdef'

async function scrape(t: TestApp): Promise<string> {
  const res = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
  assert.equal(res.statusCode, 200, res.body)
  return res.body
}

const requests = 'wristband_http_request_duration_seconds_count'

forEachBackend(
  httpBackends,
  'GET /metrics',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
    })

    test('needs the metrics bearer token', async () => {
      assert.equal((await t.request({ method: 'GET', url: '/metrics' })).statusCode, 401)
      const wrong = await t.request({ method: 'GET', url: '/metrics', token: `${METRICS_TOKEN}x` })
      assert.equal(wrong.statusCode, 401)
      const access = (await login(t, 'root@example.com')).access_token
      assert.equal((await t.request({ method: 'GET', url: '/metrics', token: access })).statusCode, 401)
      const ok = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
      assert.equal(ok.statusCode, 200)
      assert.match(String(ok.headers['content-type']), /^text\/plain; version=0\.0\.4/)
      assert.match(ok.body, /^# HELP wristband_http_request_duration_seconds /m)
    })

    test('request count and latency move per route template and status', async () => {
      const labels = { method: 'GET', route: '/health', status_code: '200' }
      const before = await scrape(t)
      for (let i = 0; i < 3; i++)
        assert.equal((await t.request({ method: 'GET', url: '/health' })).statusCode, 200)
      await t.request({ method: 'GET', url: '/no/such/path/42' })
      const after = await scrape(t)
      assert.equal(sample(after, requests, labels) - sample(before, requests, labels), 3)
      assert.ok(
        sample(after, 'wristband_http_request_duration_seconds_sum', labels) >
          sample(before, 'wristband_http_request_duration_seconds_sum', labels),
      )
      const unmatched = { route: 'unmatched', status_code: '404' }
      assert.equal(sample(after, requests, unmatched) - sample(before, requests, unmatched), 1)
      assert.doesNotMatch(after, /no\/such\/path/, 'raw URLs must not become label values')
    })

    test('tokens issued and verified, by type and outcome; the password checked to sign in', async () => {
      const before = await scrape(t)
      const pair = await login(t, 'ev1@example.com')
      for (const token of [pair.access_token, pair.access_token, 'not-a-token']) {
        await t.request({ method: 'POST', url: '/tokens/verify', payload: { token } })
      }
      const after = await scrape(t)
      const moved = (name: string, labels: Record<string, string>) =>
        sample(after, name, labels) - sample(before, name, labels)
      assert.equal(moved('wristband_tokens_issued_total', { type: 'access' }), 1)
      assert.equal(moved('wristband_tokens_issued_total', { type: 'refresh' }), 1)
      assert.equal(moved('wristband_tokens_verified_total', { type: 'access', outcome: 'valid' }), 2)
      assert.equal(moved('wristband_tokens_verified_total', { type: 'unknown', outcome: 'invalid' }), 1)
      assert.equal(moved('wristband_password_checks_total', {}), 1, 'the sign-in checks one hash')
    })

    test('rate-limit rejections per route', async () => {
      const before = await scrape(t)
      const ip = nextAddress()
      const answers: number[] = []
      for (let i = 0; i < 12; i++) {
        const res = await t.request({
          method: 'POST',
          url: '/auth/login',
          payload: {},
          headers: { 'x-forwarded-for': ip },
        })
        answers.push(res.statusCode)
      }
      assert.equal(answers.filter((s) => s === 429).length, 2)
      const after = await scrape(t)
      const route = { route: '/auth/login' }
      assert.equal(
        sample(after, 'wristband_rate_limit_rejections_total', route) -
          sample(before, 'wristband_rate_limit_rejections_total', route),
        2,
      )
    })

    test("an account's back-off refusals (429) are rate-limit rejections too", async () => {
      const before = await scrape(t)
      // From a fresh address each time: the per-address limit stays out of it, the account's back-off not.
      const attempt = (password: string) =>
        t.request({
          method: 'POST',
          url: '/auth/login',
          payload: { email: 'ev1@example.com', password, role: 'admin' },
        })
      for (let i = 0; i <= BACKOFF_POLICY.FREE_FAILURES; i++)
        assert.equal((await attempt('wrong-password')).statusCode, 401)
      assert.equal((await attempt('s3cret-pass')).statusCode, 429)
      const after = await scrape(t)
      const route = { route: '/auth/login' }
      assert.equal(
        sample(after, 'wristband_rate_limit_rejections_total', route) -
          sample(before, 'wristband_rate_limit_rejections_total', route),
        1,
      )
      t.clock.advance(BACKOFF_POLICY.MAX_LOCK_MS + 1)
    })

    test('database errors are counted even when the failing write is swallowed', async () => {
      const before = sample(await scrape(t), 'wristband_db_errors_total')
      // The audit write of a failed login fails while its table is away; the login answer does not.
      await sql`alter table audit_log rename to audit_log_away`.execute(t.db.db)
      try {
        const res = await t.request({
          method: 'POST',
          url: '/auth/login',
          payload: { email: 'nobody@example.com', password: 'wrong-password' },
        })
        assert.equal(res.statusCode, 401)
      } finally {
        await sql`alter table audit_log_away rename to audit_log`.execute(t.db.db)
      }
      assert.ok(sample(await scrape(t), 'wristband_db_errors_total') > before)
    })

    test("a feature's own counter lands in this instance's registry", async () => {
      const handovers = t.app.metrics.counter({
        name: 'wristband_test_handovers_total',
        help: 'Handovers in a test',
        labelNames: ['outcome'],
      })
      handovers.inc({ outcome: 'ok' }, 2)
      assert.equal(sample(await scrape(t), 'wristband_test_handovers_total', { outcome: 'ok' }), 2)
    })

    test('gauges read at scrape time through onCollect', async () => {
      // A gauge of its own: the outbox depth has its real collector (metric-sources.test.ts).
      const queue = t.app.metrics.gauge({ name: 'wristband_test_queue_depth', help: 'Queue in a test' })
      let depth = 7
      t.app.metrics.onCollect(() => queue.set(depth))
      t.app.metrics.onCollect(() => {
        throw new Error('a collector whose table does not exist yet')
      })
      assert.equal(sample(await scrape(t), 'wristband_test_queue_depth'), 7)
      depth = 3
      assert.equal(sample(await scrape(t), 'wristband_test_queue_depth'), 3)
    })
  },
  { METRICS_TOKEN },
)

describe('metrics exposure and isolation', () => {
  const [sqlite] = httpBackends
  let plain: TestApp
  let portOnly: TestApp
  let both: TestApp
  before(async () => {
    ;[plain, portOnly, both] = await Promise.all([
      startApp(sqlite!),
      startApp(sqlite!, { METRICS_PORT: '9464' }),
      startApp(sqlite!, { METRICS_PORT: '9464', METRICS_TOKEN }),
    ])
  })
  after(async () => {
    await Promise.all([plain?.close(), portOnly?.close(), both?.close()])
  })

  test('with neither METRICS_TOKEN nor METRICS_PORT, /metrics is not served', async () => {
    assert.equal((await plain.request({ method: 'GET', url: '/metrics' })).statusCode, 404)
  })

  test('with METRICS_PORT, the public port does not serve /metrics; the metrics listener does', async () => {
    for (const t of [portOnly, both]) {
      const res = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
      assert.equal(res.statusCode, 404)
    }
    const open = await buildMetricsServer({
      metrics: portOnly.app.metrics,
      token: portOnly.config.METRICS_TOKEN,
      logger: portOnly.app.log,
    })
    const guarded = await buildMetricsServer({
      metrics: both.app.metrics,
      token: both.config.METRICS_TOKEN,
      logger: both.app.log,
    })
    try {
      assert.equal((await open.inject({ method: 'GET', url: '/metrics' })).statusCode, 200)
      assert.equal((await open.inject({ method: 'GET', url: '/health' })).statusCode, 404)
      assert.equal((await guarded.inject({ method: 'GET', url: '/metrics' })).statusCode, 401)
      const res = await guarded.inject({
        method: 'GET',
        url: '/metrics',
        headers: { authorization: `Bearer ${METRICS_TOKEN}` },
      })
      assert.equal(res.statusCode, 200)
      assert.match(res.body, /wristband_http_request_duration_seconds/)
    } finally {
      await Promise.all([open.close(), guarded.close()])
    }
  })

  test('two instances in one process keep separate counts', async () => {
    const labels = { method: 'GET', route: '/health' }
    const scrapeOf = async (t: TestApp) => (await t.app.metrics.scrape()).body
    const otherBefore = sample(await scrapeOf(both), requests, labels)
    for (let i = 0; i < 4; i++) await portOnly.request({ method: 'GET', url: '/health' })
    assert.ok(sample(await scrapeOf(portOnly), requests, labels) >= 4)
    assert.equal(sample(await scrapeOf(both), requests, labels), otherBefore)
  })
})

test('metrics settings are checked at start', () => {
  assert.throws(
    () => loadConfig({ METRICS_TOKEN: 'short' }),
    (err: Error) => {
      assert.ok(err instanceof ConfigError)
      assert.match(err.message, /METRICS_TOKEN: must be at least 16 characters/)
      return true
    },
  )
  assert.throws(() => loadConfig({ METRICS_PORT: '8000' }), /METRICS_PORT: must differ from PORT/)
  assert.throws(() => loadConfig({ METRICS_PORT: '70000' }), /METRICS_PORT: must be between 1 and 65535/)
  assert.equal(loadConfig({ METRICS_PORT: '9464', METRICS_TOKEN }).METRICS_PORT, 9464)
})
