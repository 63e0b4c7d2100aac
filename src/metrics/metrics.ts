import {
  Counter,
  collectDefaultMetrics,
  Gauge,
  type MetricObjectWithValues,
  type MetricValue,
  Registry,
} from 'prom-client'
import { AUTH_EVENT_SERIES, type AuthEvents } from '../platform/auth-events.js'

import { type DurationSeries, RequestDurations } from './request-durations.js'

/**
 * The metrics of one app instance, in a registry of its own: two instances in one process (tests, a
 * blue/green swap) never add to each other's numbers. Features receive this object in their deps and
 * move the metric that concerns them; nothing here reaches into a feature.
 *
 * How a feature reports:
 * - tokens: `tokenIssued(type)` per signed token, `tokenVerified(type, outcome)` per check;
 * - rate limit: every 429 answered is counted by route in `instrumentRequests` (metrics.routes.ts);
 * - sign-ins: `passwordChecks.inc()` per password hash checked (wired in app.ts);
 * - mail and SMS: `mailSends.inc({ outcome: 'sent' | 'failed' })`, `smsSends.inc(...)` after each attempt;
 * - webhooks: `webhookDeliveries.inc({ outcome })` after each delivery attempt, and the outbox depth as
 *   a value read at scrape time: `onCollect(async () => metrics.outboxDepth.set(await countPending(db)))`;
 * - storage: `dbErrors` and `redisErrors` are moved by the database and Redis clients themselves;
 * - sign-ins and the other authentication events: `authEvents`, through `counted` (platform/auth-events.ts).
 */
export interface Metrics {
  readonly registry: Registry
  readonly httpRequestDuration: RequestDurations
  readonly tokensIssued: Counter<'type'>
  readonly tokensVerified: Counter<'type' | 'outcome'>
  readonly rateLimitRejections: Counter<'route'>
  readonly webhookDeliveries: Counter<'outcome'>
  readonly outboxDepth: Gauge
  readonly mailSends: Counter<'outcome'>
  readonly smsSends: Counter<'outcome'>
  readonly dbErrors: Counter
  readonly redisErrors: Counter
  readonly passwordChecks: Counter
  /** `wristband_auth_events_total{event, outcome, reason}`: what `counted` moves. */
  readonly authEvents: AuthEvents
  /** Records one answered request; called from the onResponse hook on every request. */
  observeRequest(method: string, route: string, statusCode: number, seconds: number): void
  tokenIssued(type: string): void
  tokenVerified(type: string, outcome: 'valid' | 'invalid'): void
  /**
   * Runs `fn` before every scrape, to set gauges whose value lives elsewhere (a row count). A failing
   * collector leaves its gauge at the last value and does not fail the scrape.
   */
  onCollect(fn: () => void | Promise<void>): void
  /** A counter of a feature's own, in this instance's registry; its name must start with `wristband_`. */
  counter<L extends string = never>(config: MetricConfig<L>): Counter<L>
  /** A gauge of a feature's own; set it from an `onCollect` function when its value lives elsewhere. */
  gauge<L extends string = never>(config: MetricConfig<L>): Gauge<L>
  /** The exposition text and its content type (of every worker, once `scrapeThrough` was called). */
  scrape(): Promise<{ body: string; contentType: string }>
  /** This instance's own values as prom-client JSON (collectors run first), for aggregation. */
  snapshot(): Promise<MetricObjectWithValues<MetricValue<string>>[]>
  /** Makes `scrape()` answer with what `source` gives: the sum over all workers of a cluster. */
  scrapeThrough(source: () => Promise<Scrape>): void
}

export interface Scrape {
  body: string
  contentType: string
}

export interface MetricConfig<L extends string> {
  name: `wristband_${string}`
  help: string
  labelNames?: readonly L[]
  /** How a cluster's workers' values add up (prom-client's; default sum). */
  aggregator?: 'sum' | 'min' | 'max' | 'average' | 'first' | 'omit'
}

// Seconds; the service answers most requests in a few milliseconds and password checks in tens of them.
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

/** The map under `key` in `outer`, made on first use. */
function inner<K, L, V>(outer: Map<K, Map<L, V>>, key: K): Map<L, V> {
  let map = outer.get(key)
  if (map === undefined) {
    map = new Map()
    outer.set(key, map)
  }
  return map
}

export function createMetrics(build: { version: string } = { version: 'unknown' }): Metrics {
  const registry = new Registry()
  const registers = [registry]
  collectDefaultMetrics({ register: registry })
  // Gauges that prom-client names like counters, which `promtool check metrics` rightly refuses; each
  // has a twin without the suffix (nodejs_active_handles, ...), which stays.
  for (const name of [
    'nodejs_active_handles_total',
    'nodejs_active_requests_total',
    'nodejs_active_resources_total',
  ])
    registry.removeSingleMetric(name)
  // Which release (and Node) each instance runs: during a rolling upgrade, or after a rollback, a
  // scrape tells the two apart. One series of value 1, the same in every worker.
  new Gauge({
    name: 'wristband_build_info',
    help: 'The release and Node version this instance runs (value 1)',
    labelNames: ['version', 'node_version'] as const,
    aggregator: 'max',
    registers,
  }).set({ version: build.version, node_version: process.version }, 1)

  const httpRequestDuration = new RequestDurations({
    name: 'wristband_http_request_duration_seconds',
    help: 'Time to answer a request, by route template and status; its _count is the request count',
    buckets: LATENCY_BUCKETS,
    registers,
  })
  const tokensIssued = new Counter({
    name: 'wristband_tokens_issued_total',
    help: 'Tokens signed, by type (access, refresh, offline)',
    labelNames: ['type'] as const,
    registers,
  })
  // Verifications are counted in plain numbers and added to the counter whenever it is read: a
  // prom-client increment hashes its labels (a string and an object per call) on the hottest path.
  const verifiedCounts = new Map<string, Map<'valid' | 'invalid', { n: number }>>()
  const tokensVerified = new Counter({
    name: 'wristband_tokens_verified_total',
    help: 'Credentials checked by POST /tokens/verify, by type and outcome (valid, invalid)',
    labelNames: ['type', 'outcome'] as const,
    registers,
    collect() {
      for (const [type, byOutcome] of verifiedCounts)
        for (const [outcome, count] of byOutcome) {
          if (count.n === 0) continue
          this.inc({ type, outcome }, count.n)
          count.n = 0
        }
    },
  })
  const rateLimitRejections = new Counter({
    name: 'wristband_rate_limit_rejections_total',
    help: 'Requests answered 429 (rate limits, back-off, quotas), by route template',
    labelNames: ['route'] as const,
    registers,
  })
  const webhookDeliveries = new Counter({
    name: 'wristband_webhook_deliveries_total',
    help: 'Webhook delivery attempts, by outcome (delivered, failed, gave_up)',
    labelNames: ['outcome'] as const,
    registers,
  })
  const collectors: (() => void | Promise<void>)[] = []
  const outboxDepth = new Gauge({
    name: 'wristband_webhook_outbox_depth',
    help: 'Webhook messages waiting for delivery, read at scrape time',
    // Every worker reads the same table: across workers the depth is one reading, not a sum.
    aggregator: 'max',
    registers,
  })
  const mailSends = new Counter({
    name: 'wristband_mail_sends_total',
    help: 'E-mails handed to the mail transport, by outcome (sent, failed)',
    labelNames: ['outcome'] as const,
    registers,
  })
  const smsSends = new Counter({
    name: 'wristband_sms_sends_total',
    help: 'Text messages handed to the SMS transport, by outcome (sent, failed; refused: over SMS_GLOBAL_RATE_LIMIT, not handed over)',
    labelNames: ['outcome'] as const,
    registers,
  })
  const dbErrors = new Counter({
    name: 'wristband_db_errors_total',
    help: 'Database queries that failed (connection lost, constraint violations included)',
    registers,
  })
  const redisErrors = new Counter({
    name: 'wristband_redis_errors_total',
    help: 'Errors reported by the Redis client (connection lost or refused)',
    registers,
  })
  const passwordChecks = new Counter({
    name: 'wristband_password_checks_total',
    help: 'Password hashes checked by sign-ins (argon2id, about 12 ms of CPU each; unknown names included)',
    registers,
  })

  const authEventsTotal = new Counter({
    name: 'wristband_auth_events_total',
    help: 'Authentication events (sign-ins by account kind, refresh, MFA, passkeys, password resets), by event, outcome and reason',
    labelNames: ['event', 'outcome', 'reason'] as const,
    registers,
  })
  for (const series of AUTH_EVENT_SERIES) authEventsTotal.inc(series, 0)

  // The label hashing of prom-client costs more than a Map look-up on a string; the hook runs on every
  // request, so each label combination is resolved once. Routes are templates, so the map stays small.
  const runCollectors = () => Promise.allSettled(collectors.map(async (fn) => fn()))
  let source: (() => Promise<Scrape>) | undefined
  // Nested by label, so a look-up builds no key string (the verify lane calls these on every request).
  const requestSeries = new Map<string, Map<number, Map<string, DurationSeries>>>()

  return {
    registry,
    httpRequestDuration,
    tokensIssued,
    tokensVerified,
    rateLimitRejections,
    webhookDeliveries,
    outboxDepth,
    mailSends,
    smsSends,
    dbErrors,
    redisErrors,
    passwordChecks,
    authEvents: { count: (event, outcome, reason) => authEventsTotal.inc({ event, outcome, reason }) },
    observeRequest(method, route, statusCode, seconds) {
      const byMethod = inner(inner(requestSeries, route), statusCode)
      let series = byMethod.get(method)
      if (!series) {
        series = httpRequestDuration.series({ method, route, status_code: statusCode })
        byMethod.set(method, series)
      }
      series.observe(seconds)
    },
    tokenIssued(type) {
      tokensIssued.inc({ type })
    },
    tokenVerified(type, outcome) {
      const byOutcome = inner(verifiedCounts, type)
      let count = byOutcome.get(outcome)
      if (!count) {
        count = { n: 0 }
        byOutcome.set(outcome, count)
      }
      count.n++
    },
    onCollect(fn) {
      collectors.push(fn)
    },
    counter: (config) => new Counter({ ...config, labelNames: config.labelNames ?? [], registers }),
    gauge: (config) => new Gauge({ ...config, labelNames: config.labelNames ?? [], registers }),
    async scrape() {
      if (source) return source()
      await runCollectors()
      return { body: await registry.metrics(), contentType: registry.contentType }
    },
    async snapshot() {
      await runCollectors()
      return registry.getMetricsAsJSON()
    },
    scrapeThrough(fn) {
      source = fn
    },
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** This instance's metrics, for the METRICS_PORT listener that the entry point starts. */
    metrics: Metrics
  }
}
