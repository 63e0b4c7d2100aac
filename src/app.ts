import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import path from 'node:path'
import zlib from 'node:zlib'
import compress from '@fastify/compress'
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import type { DestinationStream } from 'pino'
import { adminRoutes } from './admin/admin.routes.js'
import { createApiKeyResolver } from './api-keys/api-key.credential.js'
import { apiKeyRoutes } from './api-keys/api-keys.routes.js'
import { auditRoutes } from './audit/audit.routes.js'
import { createAuditLog } from './audit/audit.store.js'
import { authRoutes } from './auth/auth.routes.js'
import { consumerRoutes } from './consumers/consumers.routes.js'
import { dashboardRoutes } from './dashboard/dashboard.routes.js'
import { viewerAccounts } from './dashboard/session.service.js'
import { deleteSessionsOf } from './dashboard/sessions.store.js'
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
import { assertDataDirWritable, StorageHealth } from './ops/storage-health.js'
import { partnerRoutes } from './partner/partner.routes.js'
import { TRANSFER_MAIL_JOB, transferMailJob } from './partner/transfer-mail.js'
import { passkeyRoutes } from './passkeys/passkeys.routes.js'
import {
  hasPasskey,
  type PasskeyDeps,
  policyFor,
  refuseTotpUnderPolicy,
  staffAccounts,
} from './passkeys/passkeys.service.js'
import { passwordResetRoutes } from './password-reset/password-reset.routes.js'
import { RESET_MAIL_JOB, resetMailJob } from './password-reset/reset-mail.js'
import { createBackoff } from './platform/backoff.js'
import { type Clock, systemClock } from './platform/clock.js'
import type { Config } from './platform/config.js'
import { openDatabase, servicePoolOptions } from './platform/db/database.js'
import { createHttpApp, registerHttp, registerRateLimits, requestId } from './platform/http.js'
import { createHttpClient } from './platform/http-client.js'
import { JobRunner } from './platform/jobs/jobs.js'
import { createSealer, deriveKey } from './platform/keys.js'
import { logListeningUrls } from './platform/logging.js'
import { MAIL_JOB, type MailTransport, mailJob, outboxTransport, smtpTransport } from './platform/mail.js'
import { registerOpenApi } from './platform/openapi.js'
import { createDummyHash } from './platform/passwords.js'
import type { RouteLimiter } from './platform/rate-limit.js'
import { connectRedis, createRedis } from './platform/redis.js'
import { registerSecurityHeaders, securityHeaders } from './platform/security-headers.js'
import { createSmsSender, type SmsSender } from './platform/sms.js'
import { databaseUnavailable } from './platform/startup.js'
import { releaseVersion } from './platform/version.js'
import { startRetention } from './retention/retention.js'
import { ticketRoutes } from './tickets/tickets.routes.js'
import { createTokenAuthority } from './tokens/authority.js'
import { resolveSigningSecret } from './tokens/secret.js'
import type { TokenService } from './tokens/token.service.js'
import { tokenVerifyRoutes } from './tokens/verify.routes.js'
import { type VerifyAnswers, verifyAnswers } from './tokens/verify-answer.js'
import { replayLaneBodies, verifyLane } from './tokens/verify-lane.js'
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
}

/** The release's version: the OpenAPI document's, the one GET / shows and wristband_build_info's. */
const SERVICE_VERSION = releaseVersion()

/**
 * Builds the whole service on its dependencies: opens the database (and applies migrations),
 * connects Redis when configured, and registers every feature. `listen()` is the caller's.
 */
export async function buildApp(config: Config, deps: AppDependencies = {}): Promise<FastifyInstance> {
  const clock = deps.clock ?? systemClock
  const lane = verifyLaneSlot(config)
  const app = createHttpApp(config, deps.logStream, lane?.serverFactory)
  logListeningUrls(app)
  const metrics = createMetrics({ version: SERVICE_VERSION })
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
    await assemble(app, config, clock, deps, metrics, closers, lane?.set)
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
  setLane: ((lane: Lane) => void) | undefined,
): Promise<void> {
  // Platform: database, Redis, keys, jobs, mail, the outbound HTTP client, SMS.
  // DATA_DIR holds generated keys and the outbox: refused at once, in one line, when it takes no file.
  await assertDataDirWritable(config.DATA_DIR)
  // Failed writes (read-only, disk full) are told to the storage health, which readiness reads.
  let storage: StorageHealth | undefined
  const database = await openDatabase(config.databaseUrl, {
    ...servicePoolOptions(config),
    onError: (err) => {
      metrics.dbErrors.inc()
      storage?.reportDatabase(err)
    },
  }).catch((err) => {
    throw databaseUnavailable(config.databaseUrl, err)
  })
  closers.push(() => database.close())
  storage = new StorageHealth({
    clock,
    log: app.log,
    databaseName: database.name,
    dataDir: path.resolve(config.DATA_DIR),
  })
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
  const authority = createTokenAuthority({
    db,
    clock,
    log: app.log,
    redis,
    config,
    sessionStores: [deleteSessionsOf],
  })
  const tokens = await authority.serve({ secrets, edgeKeys, audit, metrics, config })
  closers.push(() => authority.stop())
  const answers = verifyAnswers()
  const apiKeyResolver = createApiKeyResolver(db, clock, authority.revocations)
  tokens.registerCredential(apiKeyResolver.prefix, apiKeyResolver.resolve)
  const backoff = createBackoff(clock, redis, config.REDIS_PREFIX)
  // The one password sign-in's shared parts (platform/password-sign-in.ts).
  const passwords = { backoff, dummyHash: createDummyHash(), onCheck: () => metrics.passwordChecks.inc() }
  const mfaSealer = createSealer(secrets, 'mfa-secret')
  const freshness = { clock, windowHours: config.MFA_FRESHNESS_WINDOW_HOURS }
  // Passkeys (WebAuthn), off while there is no RP ID (production without WEBAUTHN_RP_ID).
  const passkeys: PasskeyDeps = {
    db,
    clock,
    audit,
    backoff,
    relyingParty: config.WEBAUTHN_RP_ID
      ? { rpId: config.WEBAUTHN_RP_ID, origins: config.WEBAUTHN_ORIGINS }
      : undefined,
    requiredFor: config.PASSKEYS_REQUIRED_FOR,
    accounts: staffAccounts(db),
  }
  // Routes that create lasting credentials need fresh MFA while the administrator's MFA (TOTP or a
  // passkey) is on.
  const protectCredentials = credentialGuard({
    db,
    tokens,
    audit,
    freshness,
    hasPasskey: (id) => hasPasskey(passkeys, { kind: 'admin', id }),
  })
  // PASSKEYS_REQUIRED_FOR: an administrator in scope who has a passkey gives it instead of a TOTP code.
  const passkeyPolicy = (id: number, ip: string) => refuseTotpUnderPolicy(passkeys, id, ip)
  const jobs = new JobRunner({
    db,
    dialect: database.dialect,
    clock,
    log: app.log,
    pollMs: config.JOBS_POLL_MS,
  })
  const mail = countSends(
    deps.mailTransport ??
      (config.SMTP_URL && config.MAIL_TRANSPORT !== 'outbox'
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
  // Retention: old rows deleted in small batches by an hourly job (src/retention/retention.ts).
  await startRetention(jobs, { db, clock, log: app.log, config })
  // A committed notification goes out at once instead of at the next poll.
  const runDueJobs = () => {
    jobs.runDue().catch((err) => app.log.warn({ err: { message: (err as Error).message } }, 'job run failed'))
  }

  // HTTP plumbing every route shares: rate limits (audited once a minute per address and route),
  // security headers, the OpenAPI document and /docs.
  const limiters = registerRateLimits(app, {
    clock,
    redis,
    config,
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
  await app.register(healthRoutes, { logLevel: config.LOG_LEVEL })
  await app.register(indexRoutes, { version: SERVICE_VERSION })
  await app.register(authRoutes, {
    db,
    tokens,
    audit,
    passwords,
    // Read only where PASSKEYS_REQUIRED_FOR names someone: otherwise sign-in costs no query more.
    ...(passkeys.requiredFor === 'none'
      ? {}
      : {
          passkeyPolicy: async (id: number) => {
            const account = await passkeys.accounts('admin', id)
            return account && policyFor(passkeys, account)
          },
        }),
  })
  await app.register(tokenVerifyRoutes, { tokens, answers, logLevel: config.LOG_LEVEL })
  await app.register(adminRoutes, { tokens, db })
  await app.register(dashboardRoutes, {
    db,
    clock,
    tokens,
    audit,
    passwords,
    totp: { db, clock, audit, sealer: mfaSealer, backoff, passkeyPolicy },
    signInSealer: createSealer(secrets, 'dashboard-sign-in'),
    passkeys: { ...passkeys, accounts: viewerAccounts(db) },
    freshness,
    protectCredentials,
    runDueJobs,
    endSessions: authority.endSessions,
  })
  await app.register(mfaRoutes, {
    db,
    clock,
    tokens,
    audit,
    sealer: mfaSealer,
    backoff,
    passkeyPolicy,
    freshness,
    protectCredentials,
  })
  await app.register(passkeyRoutes, { ...passkeys, tokens, protectCredentials })
  await app.register(passwordResetRoutes, { db, clock, endSessions: authority.endSessions, audit, config })
  await app.register(apiKeyRoutes, { db, clock, tokens, audit, protectCredentials })
  await app.register(offlineRoutes, { db, tokens, audit, protectCredentials })
  await app.register(auditRoutes, { db, tokens })
  // Owned by this app instance; the entry point calls beginDrain on SIGTERM, and endKeepAlive when its
  // listener closes at the end of the drain period.
  let draining = false
  app.decorate('beginDrain', () => {
    draining = true
  })
  let keepAliveEnded = false
  app.decorate('endKeepAlive', () => {
    keepAliveEnded = true
  })
  // From then on every answer ends its connection (a client sending straight to the instance reconnects
  // and finds the port closed: refused, never reset), and the verify lane leaves its requests to Fastify.
  app.addHook('onSend', async (_request, reply) => {
    if (keepAliveEnded) reply.header('connection', 'close')
  })
  await app.register(opsRoutes, {
    database,
    storage,
    draining: () => draining,
    logLevel: config.LOG_LEVEL,
    ...(redis ? { redis } : {}),
  })
  // 1 while a dependency answers (the lowest over workers); Redis at 0 means degraded, not unready.
  const dependencyUp = metrics.gauge({
    name: 'wristband_dependency_up',
    help: 'Whether a dependency answers and takes writes (1) or not (0): database, data_dir, redis',
    labelNames: ['dependency'] as const,
    aggregator: 'min',
  })
  const storageHealth = storage
  metrics.onCollect(() => {
    const failed = storageHealth.recent()
    dependencyUp.set({ dependency: 'database' }, failed?.path === database.name ? 0 : 1)
    dependencyUp.set({ dependency: 'data_dir' }, failed?.path === storageHealth.dataDir ? 0 : 1)
    if (redis) dependencyUp.set({ dependency: 'redis' }, redis.status === 'ready' ? 1 : 0)
  })
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
    partnerRateLimit: config.PARTNER_RATE_LIMIT,
  })
  const partnerRateLimit = config.PARTNER_RATE_LIMIT
  await app.register(edgeRoutes, { db, clock, tokens, keys: edgeKeys, codes, partnerRateLimit })
  await app.register(webhookRoutes, { db, clock, http, runDueJobs, sealer: webhookSealer, partnerRateLimit })
  await app.register(ticketRoutes, {
    tokens,
    clock,
    db,
    runDueJobs,
    offlineHours: config.OFFLINE_TOKEN_EXPIRE_HOURS,
  })
  await app.register(holderRoutes, { db, clock, tokens, codes })

  if (setLane)
    setLane(
      attachVerifyLane(app, config, {
        tokens,
        answers,
        limiters,
        metrics,
        keepAliveEnded: () => keepAliveEnded,
      }),
    )

  app.addHook('onReady', async () => jobs.start())
}

type Lane = (
  req: IncomingMessage,
  res: ServerResponse,
  fastify: (req: IncomingMessage, res: ServerResponse) => void,
) => boolean

/**
 * The verify lane (see tokens/verify-lane.ts) sits in front of Fastify on the same server; it is
 * set once the app is assembled. At debug and trace the route logs every request, which the lane
 * does not: it is off there (undefined).
 */
function verifyLaneSlot(
  config: Config,
): { serverFactory: FastifyServerOptions['serverFactory']; set: (lane: Lane) => void } | undefined {
  const laneWanted = config.VERIFY_FAST_LANE && config.LOG_LEVEL !== 'debug' && config.LOG_LEVEL !== 'trace'
  if (!laneWanted) return undefined
  let lane: Lane | undefined
  return {
    serverFactory: (handler, fastifyOptions) => {
      const opts = fastifyOptions as {
        http?: http.ServerOptions
        keepAliveTimeout?: number
        requestTimeout?: number
        connectionTimeout?: number
      }
      const server = http.createServer(opts.http ?? {}, (req, res) => {
        if (lane === undefined || !lane(req, res, handler)) handler(req, res)
      })
      // What Fastify sets on the server it makes itself.
      server.keepAliveTimeout = opts.keepAliveTimeout ?? 72_000
      server.requestTimeout = opts.requestTimeout ?? 0
      server.setTimeout(opts.connectionTimeout ?? 0)
      return server
    },
    set: (l) => {
      lane = l
    },
  }
}

/** The verify lane over the assembled app's token service, limiter and metrics. */
function attachVerifyLane(
  app: FastifyInstance,
  config: Config,
  deps: {
    tokens: TokenService
    answers: VerifyAnswers
    limiters: Map<string, RouteLimiter>
    metrics: Metrics
    /** Once the listener closed, Fastify answers verify too: its answers close the connection. */
    keepAliveEnded: () => boolean
  },
): Lane {
  const { tokens, answers, limiters, metrics, keepAliveEnded } = deps
  let closing = false
  app.addHook('preClose', async () => {
    closing = true
  })
  replayLaneBodies(app)
  return verifyLane({
    tokens,
    answers,
    limiter: limiters.get('POST /tokens/verify')!,
    metrics,
    securityHeaders: securityHeaders().api,
    trustProxy: config.TRUST_PROXY,
    bodyLimit: config.BODY_LIMIT_BYTES,
    cors: config.CORS_ORIGINS.length > 0,
    requestId,
    closing: () => closing || keepAliveEnded(),
  })
}
