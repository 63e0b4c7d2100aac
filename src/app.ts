import path from 'node:path'
import zlib from 'node:zlib'
import compress from '@fastify/compress'
import type { FastifyInstance } from 'fastify'
import type { DestinationStream } from 'pino'
import { adminRoutes } from './admin/admin.routes.js'
import { createApiKeyResolver, createVerifyCredentials } from './api-keys/api-key.credential.js'
import { apiKeyRoutes } from './api-keys/api-keys.routes.js'
import { auditRoutes } from './audit/audit.routes.js'
import { createAuditLog } from './audit/audit.store.js'
import { authRoutes } from './auth/auth.routes.js'
import { consumerRoutes } from './consumers/consumers.routes.js'
import { dashboardRoutes } from './dashboard/dashboard.routes.js'
import { deviceRoutes } from './devices/devices.routes.js'
import { edgeRoutes } from './edge/edge.routes.js'
import { resolveEdgeKeys } from './edge/edge-keys.js'
import { TicketCodes } from './edge/ticket-codes.js'
import { healthRoutes } from './health/health.routes.js'
import { holderRoutes } from './holder/holder.routes.js'
import { idpRoutes } from './idp/idp.routes.js'
import { IdpVerifier } from './idp/idp.verifier.js'
import { countSends, createMetrics, type Metrics } from './metrics/metrics.js'
import { instrumentRequests, metricsRoutes } from './metrics/metrics.routes.js'
import { credentialGuard } from './mfa/fresh-mfa.js'
import { mfaRoutes } from './mfa/mfa.routes.js'
import { offlineRoutes } from './offline/offline.routes.js'
import { indexRoutes } from './ops/index.routes.js'
import { opsRoutes } from './ops/ops.routes.js'
import { partnerRoutes } from './partner/partner.routes.js'
import { TRANSFER_MAIL_JOB, transferMailJob } from './partner/transfer-mail.js'
import { passwordResetRoutes } from './password-reset/password-reset.routes.js'
import { RESET_MAIL_JOB, resetMailJob } from './password-reset/reset-mail.js'
import { createBackoff } from './platform/backoff.js'
import { type Clock, systemClock } from './platform/clock.js'
import type { Config } from './platform/config.js'
import { openDatabase, servicePoolOptions } from './platform/db/database.js'
import { createHttpApp, registerHttp, registerRateLimits } from './platform/http.js'
import { createHttpClient } from './platform/http-client.js'
import { JobRunner } from './platform/jobs/jobs.js'
import { createSealer, deriveKey } from './platform/keys.js'
import { logListeningUrls } from './platform/logging.js'
import { MAIL_JOB, type MailTransport, mailJob, outboxTransport, smtpTransport } from './platform/mail.js'
import { registerOpenApi } from './platform/openapi.js'
import { createDummyHash } from './platform/passwords.js'
import { perMinute } from './platform/rate-limit.js'
import { connectRedis, createRedis } from './platform/redis.js'
import { registerSecurityHeaders } from './platform/security-headers.js'
import { createSmsSender, type SmsSender } from './platform/sms.js'
import { databaseUnavailable } from './platform/startup.js'
import { ticketRoutes } from './tickets/tickets.routes.js'
import { createTokenAuthority } from './tokens/authority.js'
import { resolveSigningSecret } from './tokens/secret.js'
import { tokenVerifyRoutes, VERIFY_LIMITS, type VerifyLimits } from './tokens/verify.routes.js'
import { verifyAnswers } from './tokens/verify-answer.js'
import { verifyCallers } from './tokens/verify-callers.js'
import { createVerifyLane } from './tokens/verify-lane.js'
import { webhookDeliveryJob } from './webhooks/webhook-delivery.js'
import { webhookRoutes } from './webhooks/webhooks.routes.js'
import { countPendingDeliveries, resealStoredSecrets, WEBHOOK_JOB } from './webhooks/webhooks.store.js'

export interface AppDependencies {
  /** Time source; tests pass a controllable one. */
  clock?: Clock
  /** Where log lines go (stdout when absent); tests capture them. */
  logStream?: DestinationStream
  /** Mail delivery; SMTP_URL or the outbox folder when absent. */
  mailTransport?: MailTransport
  /** Where SMS go (the configured provider when absent); tests pass one that keeps the messages. */
  sms?: SmsSender
  /** POST /tokens/verify's limits (VERIFY_LIMITS when absent); tests try others on the route and the lane. */
  verifyLimits?: VerifyLimits
}

/** The API's version: the OpenAPI document's and the one GET / shows. */
const SERVICE_VERSION = '0.1.0'

/**
 * Builds the whole service on its dependencies: opens the database (and applies migrations),
 * connects Redis when configured, and registers every feature. `listen()` is the caller's.
 */
export async function buildApp(config: Config, deps: AppDependencies = {}): Promise<FastifyInstance> {
  const clock = deps.clock ?? systemClock
  const app = createHttpApp(config, deps.logStream)
  logListeningUrls(app)
  const metrics = createMetrics()
  app.decorate('metrics', metrics)
  instrumentRequests(app, metrics)
  registerHttp(app)
  app.decorateRequest('auth', null)

  // Resources are closed in reverse order of opening, when the app closes or fails to build.
  const closers: (() => unknown)[] = []
  const closeAll = async () => {
    for (const close of closers.splice(0).reverse()) await close()
  }
  app.addHook('onClose', closeAll)
  try {
    await assemble(app, config, clock, deps, metrics, closers)
  } catch (err) {
    await closeAll()
    throw err
  }
  return app
}

async function assemble(
  app: FastifyInstance,
  config: Config,
  clock: Clock,
  deps: AppDependencies,
  metrics: Metrics,
  closers: (() => unknown)[],
): Promise<void> {
  // Platform: database, Redis, keys, jobs, mail, the outbound HTTP client, SMS.
  const database = await openDatabase(config.databaseUrl, {
    ...servicePoolOptions(config),
    onError: () => metrics.dbErrors.inc(),
  }).catch((err) => {
    throw databaseUnavailable(config.databaseUrl, err)
  })
  closers.push(() => database.close())
  const { db } = database
  const redis = config.REDIS_URL ? createRedis(config.REDIS_URL, app.log) : undefined
  if (redis) {
    redis.on('error', () => metrics.redisErrors.inc())
    closers.push(() => redis.disconnect())
  }
  const { ahead } = await database.migrate().catch((err) => {
    throw databaseUnavailable(config.databaseUrl, err)
  })
  if (ahead.length > 0)
    app.log.warn(
      { migrations: ahead },
      'the database holds migrations of a newer release; running on beside them (each migration stays compatible with the release before it)',
    )
  if (redis) await connectRedis(redis)

  // The signing secret, then the earlier ones that still verify; feature keys are derived from them.
  const secrets = [resolveSigningSecret(config, app.log), ...config.JWT_PREVIOUS_SECRETS]
  // The Ed25519 edge key: ticket codes (and EdDSA offline tokens) that devices check offline.
  const edgeKeys = await resolveEdgeKeys(config, app.log)
  const codes = new TicketCodes({ keys: edgeKeys })
  const audit = createAuditLog(db, clock, app.log)

  // The token authority: codec, revocation list, token service; the command line uses the same.
  const authority = createTokenAuthority({ db, clock, log: app.log, redis, config })
  const tokens = await authority.serve({ secrets, edgeKeys, audit, metrics, config })
  closers.push(() => authority.stop())
  const answers = verifyAnswers()
  const limitsOfVerify = deps.verifyLimits ?? VERIFY_LIMITS
  const apiKeyResolver = createApiKeyResolver(db, clock, authority.revocations)
  tokens.registerCredential(apiKeyResolver.prefix, apiKeyResolver.resolve)
  const backoff = createBackoff(clock, redis, config.REDIS_PREFIX)
  // The one password sign-in's shared parts (platform/password-sign-in.ts).
  const passwords = { backoff, dummyHash: createDummyHash(), onCheck: () => metrics.passwordChecks.inc() }
  const mfaSealer = createSealer(secrets, 'mfa-secret')
  const freshness = { clock, windowHours: config.MFA_FRESHNESS_WINDOW_HOURS }
  // Routes that create lasting credentials need fresh MFA while the administrator's MFA is on.
  const protectCredentials = credentialGuard({ db, tokens, audit, freshness })
  const jobs = new JobRunner({
    db,
    dialect: database.dialect,
    clock,
    log: app.log,
    pollMs: config.JOBS_POLL_MS,
  })
  const mail = countSends(
    deps.mailTransport ??
      (config.SMTP_URL
        ? smtpTransport(config.SMTP_URL, config.MAIL_FROM)
        : outboxTransport(path.join(config.DATA_DIR, 'outbox', 'mail'), config.MAIL_FROM)),
    metrics.mailSends,
  )
  jobs.register(MAIL_JOB, mailJob(mail))
  jobs.register(RESET_MAIL_JOB, resetMailJob({ db, clock, mail, config }))
  closers.push(() => jobs.stop())
  jobs.register(
    TRANSFER_MAIL_JOB,
    transferMailJob({ db, clock, mail, publicBaseUrl: config.PUBLIC_BASE_URL, codes }),
  )
  // The HTTP client for caller-chosen addresses (webhooks); refuses non-public ones unless allowed.
  const http = createHttpClient({ allowPrivate: config.WEBHOOK_ALLOW_PRIVATE, timeoutMs: 10_000 })
  closers.push(() => http.close())
  // Webhook signing secrets are sealed at rest; plain rows (from before sealing) and rows sealed
  // under a previous signing secret are sealed under the current one now.
  const webhookSealer = createSealer(secrets, 'webhook-secret')
  await resealStoredSecrets(db, webhookSealer)
  jobs.register(
    WEBHOOK_JOB,
    webhookDeliveryJob({
      db,
      clock,
      http,
      retrySchedule: config.WEBHOOK_RETRY_SCHEDULE,
      sealer: webhookSealer,
      onAttempt: (outcome) => metrics.webhookDeliveries.inc({ outcome }),
    }),
  )
  metrics.onCollect(async () => metrics.outboxDepth.set(await countPendingDeliveries(db)))
  // A committed notification goes out at once instead of at the next poll.
  const runDueJobs = () => {
    jobs.runDue().catch((err) => app.log.warn({ err: { message: (err as Error).message } }, 'job run failed'))
  }

  // HTTP plumbing every route shares: rate limits (audited once a minute per address and route),
  // security headers, the OpenAPI document and /docs.
  const limits = registerRateLimits(app, {
    clock,
    redis,
    config,
    onRefused: (route) => metrics.rateLimitRejections.inc({ route }),
    onLimited: (ip, route) =>
      void audit.record({ kind: 'rate_limit_hit', ip, outcome: 'denied', detail: { route } }),
  })
  await registerSecurityHeaders(app, config.CORS_ORIGINS)
  // Large JSON answers (lists, the scanner feed) compressed as the client accepts; small ones (verify's,
  // which its fast lane answers before Fastify anyway) are not worth it. Brotli at a quality that keeps
  // a megabyte to milliseconds.
  await app.register(compress, {
    threshold: 1024,
    encodings: ['br', 'gzip'],
    brotliOptions: { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4 } },
  })
  await registerOpenApi(app, SERVICE_VERSION)

  // The features.
  await app.register(healthRoutes)
  await app.register(indexRoutes, { version: SERVICE_VERSION })
  await app.register(authRoutes, { db, tokens, audit, passwords })
  // Verify callers: per verify credential (an API key with scope tokens:verify), else per address.
  const callers = verifyCallers({
    anonymous: limits.limiter('POST /tokens/verify', perMinute(limitsOfVerify.anonymousPerMinute).rateLimit),
    credentials: limits.limiter(
      'POST /tokens/verify credential',
      perMinute(config.VERIFY_CLIENT_RATE_LIMIT).rateLimit,
    ),
    lookup: createVerifyCredentials(db, clock, authority.revocations),
  })
  await app.register(tokenVerifyRoutes, {
    tokens,
    answers,
    callers,
    logLevel: config.LOG_LEVEL,
    limits: limitsOfVerify,
  })
  await app.register(adminRoutes, { tokens, db })
  await app.register(dashboardRoutes, {
    db,
    clock,
    tokens,
    audit,
    passwords,
    totp: { db, clock, audit, sealer: mfaSealer, backoff },
    signInSealer: createSealer(secrets, 'dashboard-sign-in'),
    protectCredentials,
    runDueJobs,
  })
  await app.register(mfaRoutes, {
    db,
    clock,
    tokens,
    audit,
    sealer: mfaSealer,
    backoff,
    freshness,
    protectCredentials,
  })
  await app.register(passwordResetRoutes, { db, clock, tokens, audit, config })
  await app.register(apiKeyRoutes, { db, clock, tokens, audit, protectCredentials })
  await app.register(offlineRoutes, { db, tokens, audit, protectCredentials })
  await app.register(auditRoutes, { db, tokens })
  // Owned by this app instance; the entry point calls beginDrain on SIGTERM.
  let draining = false
  app.decorate('beginDrain', () => {
    draining = true
  })
  await app.register(opsRoutes, { database, draining: () => draining, ...(redis ? { redis } : {}) })
  // Off the public port unless a token guards it; METRICS_PORT serves it on a listener of its own.
  if (config.METRICS_TOKEN !== undefined && config.METRICS_PORT === undefined)
    await app.register(metricsRoutes, { metrics, token: config.METRICS_TOKEN })

  // SMS bypass the job queue on purpose: a queued message would keep a live one-time code in plain text.
  let sms = deps.sms
  if (!sms) {
    const configured = createSmsSender(config, clock)
    closers.push(() => configured.close())
    sms = configured
  }
  await app.register(consumerRoutes, {
    db,
    clock,
    tokens,
    audit,
    passwords,
    sms: countSends(sms, metrics.smsSends),
    phoneCodeKey: deriveKey(secrets[0]!, 'phone-codes'),
  })
  const verifier = new IdpVerifier({
    issuers: config.IDP_ISSUERS,
    clock,
    cooldownMs: config.IDP_JWKS_COOLDOWN_SECONDS * 1000,
    timeoutMs: config.IDP_HTTP_TIMEOUT_SECONDS * 1000,
  })
  await app.register(idpRoutes, { db, clock, tokens, audit, verifier })
  if (config.NODE_ENV === 'production' && !config.DEVICE_KEYS_REQUIRED)
    app.log.warn(
      'DEVICE_KEYS_REQUIRED=false in production: a device without a key signs in with its MAC and event id alone',
    )
  await app.register(deviceRoutes, {
    db,
    clock,
    tokens,
    audit,
    passwords,
    sealer: createSealer(secrets, 'operator-session'),
    keysRequired: config.DEVICE_KEYS_REQUIRED,
    protectCredentials,
  })
  await app.register(partnerRoutes, {
    db,
    clock,
    mailDelaySeconds: config.TRANSFER_EMAIL_DELAY_SECONDS,
    codes,
  })
  await app.register(edgeRoutes, { db, clock, tokens, keys: edgeKeys, codes })
  await app.register(webhookRoutes, { db, clock, http, runDueJobs, sealer: webhookSealer })
  await app.register(ticketRoutes, {
    tokens,
    clock,
    db,
    runDueJobs,
    offlineHours: config.OFFLINE_TOKEN_EXPIRE_HOURS,
  })
  await app.register(holderRoutes, { db, clock, tokens, codes })

  // The verify lane in front of Fastify on the same server (tokens/verify-lane.ts).
  createVerifyLane(config, deps.verifyLimits)?.attach(app, { tokens, answers, callers, metrics })

  app.addHook('onReady', async () => jobs.start())
}
