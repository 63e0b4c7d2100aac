import path from 'node:path'
import zlib from 'node:zlib'
import compress from '@fastify/compress'
import type { FastifyInstance } from 'fastify'
import type { DestinationStream } from 'pino'
import { adminRoutes } from './admin/admin.routes.js'
import { verifyCredentials } from './api-keys/api-key.credential.js'
import { createApiKeyCache } from './api-keys/api-key-cache.js'
import { apiKeyRoutes } from './api-keys/api-keys.routes.js'
import { auditRoutes } from './audit/audit.routes.js'
import { type AuditLog, createAuditLog } from './audit/audit.store.js'
import { authRoutes } from './auth/auth.routes.js'
import { checkinRoutes } from './checkin/checkin.routes.js'
import { consumerRoutes } from './consumers/consumers.routes.js'
import { dashboardRoutes } from './dashboard/dashboard.routes.js'
import { viewerAccounts } from './dashboard/session.service.js'
import { deviceRoutes } from './devices/devices.routes.js'
import { edgeRoutes } from './edge/edge.routes.js'
import { resolveEdgeKeys } from './edge/edge-keys.js'
import { TicketCodes } from './edge/ticket-codes.js'
import { healthRoutes } from './health/health.routes.js'
import { holderRoutes } from './holder/holder.routes.js'
import { idpRoutes } from './idp/idp.routes.js'
import { createMetrics, type Metrics } from './metrics/metrics.js'
import { instrumentRequests, metricsRoutes } from './metrics/metrics.routes.js'
import { credentialGuard } from './mfa/fresh-mfa.js'
import { mfaRoutes } from './mfa/mfa.routes.js'
import { oauth2Routes } from './oauth2/oauth2.routes.js'
import { offlineRoutes } from './offline/offline.routes.js'
import { FEATURE_OPENAPI, INTERFACE_VERSION } from './openapi.js'
import { indexRoutes } from './ops/index.routes.js'
import { opsRoutes } from './ops/ops.routes.js'
import { assertDataDirWritable, StorageHealth } from './ops/storage-health.js'
import { partnerRoutes } from './partner/partner.routes.js'
import { passkeyRoutes } from './passkeys/passkeys.routes.js'
import {
  hasPasskey,
  type PasskeyDeps,
  policyFor,
  refuseTotpUnderPolicy,
  staffAccounts,
} from './passkeys/passkeys.service.js'
import { passwordResetRoutes } from './password-reset/password-reset.routes.js'
import { createBackoff } from './platform/backoff.js'
import { IPV6_PREFIX_BITS } from './platform/client-address.js'
import { type Clock, systemClock } from './platform/clock.js'
import type { Config } from './platform/config.js'
import { createHttpApp, registerHttp, registerRateLimits } from './platform/http.js'
import { secretKeys } from './platform/keys.js'
import { logListeningUrls } from './platform/logging.js'
import type { MailTransport } from './platform/mail.js'
import { openPlatform, type Platform } from './platform/open.js'
import { registerOpenApi } from './platform/openapi.js'
import { createDummyHash } from './platform/passwords.js'
import { RequestPrecedence } from './platform/precedence.js'
import { perMinute } from './platform/rate-limit.js'
import { registerSecurityHeaders } from './platform/security-headers.js'
import type { SmsSender } from './platform/sms.js'
import { startTracing } from './platform/tracing.js'
import { packageRoot, releaseVersion } from './platform/version.js'
import { startRetention } from './retention/retention.js'
import { scannerPageRoutes } from './scanner-page/scanner-page.routes.js'
import { ticketRoutes } from './tickets/tickets.routes.js'
import { SESSION_STORES } from './token-extensions.js'
import { createTokenAuthority } from './tokens/authority.js'
import { checkAnswers } from './tokens/check.js'
import { tokenCheckRoutes } from './tokens/check.routes.js'
import type { RevocationStore } from './tokens/revocations.js'
import { resolveSigningSecret } from './tokens/secret.js'
import { tokenVerifyRoutes, VERIFY_LIMITS, type VerifyLimits } from './tokens/verify.routes.js'
import { verifyAnswers } from './tokens/verify-answer.js'
import { verifyCallers } from './tokens/verify-callers.js'
import { createVerifyLane } from './tokens/verify-lane.js'
import { webhookRoutes } from './webhooks/webhooks.routes.js'

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
  /** The built scanner page (dist/scanner-page when absent); tests build it from the sources. */
  scannerPage?: string
  /**
   * Awaited before each page of the revocation list's load at start (a turn of the event loop when
   * absent); tests hold the load to check verify while it runs.
   */
  revocationLoadPace?: () => Promise<void>
}

/** The release's version: the one GET / shows, wristband_build_info's and the OpenAPI document's `x-release`. */
const SERVICE_VERSION = releaseVersion()

/**
 * Builds the whole service on its dependencies: opens the database (and applies migrations),
 * connects Redis when configured, and registers every feature. `listen()` is the caller's.
 */
export async function buildApp(config: Config, deps: AppDependencies = {}): Promise<FastifyInstance> {
  const clock = deps.clock ?? systemClock
  // Before the Fastify instance exists: @fastify/otel instruments it as it is created.
  const tracing = config.tracing ? await startTracing() : undefined
  const app = createHttpApp(config, deps.logStream)
  if (tracing) app.addHook('onClose', () => tracing.flush())
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
    await assemble(app, {
      config,
      clock,
      deps,
      metrics,
      closeLater: (c) => closers.push(c),
    })
  } catch (err) {
    await closeAll()
    throw err
  }
  return app
}

/** What `assemble` is given by `buildApp`. */
interface Assembly {
  config: Config
  clock: Clock
  deps: AppDependencies
  metrics: Metrics
  /** Adds a resource to close when the app closes, in reverse order of opening. */
  closeLater: (close: () => unknown) => void
}

/** The platform, the shared parts of security, the HTTP plumbing, then the features, in order. */
async function assemble(app: FastifyInstance, a: Assembly): Promise<void> {
  const { config, clock, metrics } = a
  const { platform, storage, precedence } = await openStorage(app, a)
  const { db, jobs } = platform
  const core = await openCore(app, a, platform)
  const limiters = await registerPlumbing(app, a, platform, core.audit)
  // What most features are built on; a plugin takes the parts its options name.
  const shared = { ...platform, ...core, clock, config, metrics }
  // Retention: old rows deleted in small batches by an hourly job (src/retention/retention.ts).
  await startRetention(jobs, { db, clock, log: app.log, config }, metrics)

  // The features.
  await app.register(healthRoutes, { logLevel: config.LOG_LEVEL })
  await app.register(indexRoutes, { version: SERVICE_VERSION })
  await app.register(authRoutes, { ...shared, passkeyPolicy: core.loginPasskeyPolicy })
  const verify = verifyWiring(a, shared, limiters)
  await app.register(tokenVerifyRoutes, { ...verify, logLevel: config.LOG_LEVEL })
  await app.register(tokenCheckRoutes, { ...verify, logLevel: config.LOG_LEVEL })
  await app.register(oauth2Routes, { ...shared, callers: verify.callers })
  await app.register(adminRoutes, shared)
  await app.register(dashboardRoutes, dashboardOptions(shared))
  await app.register(mfaRoutes, { ...shared, sealer: core.mfaSealer })
  await app.register(passkeyRoutes, { ...core.passkeys, ...shared })
  await app.register(passwordResetRoutes, shared)
  await app.register(apiKeyRoutes, shared)
  await app.register(offlineRoutes, shared)
  await app.register(auditRoutes, shared)
  const ops = await registerOps(app, a, platform, storage, core.authority.revocations)
  await app.register(consumerRoutes, shared)
  await app.register(idpRoutes, shared)
  await app.register(deviceRoutes, { ...shared, revocations: core.authority.revocations })
  await app.register(partnerRoutes, shared)
  await app.register(edgeRoutes, {
    ...shared,
    precedence,
    partnerRateLimit: config.PARTNER_RATE_LIMIT,
    keys: core.edgeKeys,
  })
  await app.register(webhookRoutes, shared)
  await app.register(ticketRoutes, shared)
  await app.register(checkinRoutes, shared)
  await app.register(holderRoutes, shared)
  await app.register(scannerPageRoutes, {
    dir: a.deps.scannerPage ?? path.join(packageRoot(), 'dist', 'scanner-page'),
  })

  // The verify lane in front of Fastify on the same server (tokens/verify-lane.ts); once the listener
  // closed, Fastify answers verify too (its answers close the connection).
  createVerifyLane(config, verify.limits)?.attach(app, { ...verify, metrics, toFastify: ops.keepAliveEnded })
  app.addHook('onReady', async () => jobs.start())
}

/**
 * DATA_DIR checked, then the platform (platform/open.ts), and the storage health that failed writes
 * (read-only, disk full) are told to and readiness reads.
 */
async function openStorage(app: FastifyInstance, a: Assembly) {
  const { config, clock } = a
  // DATA_DIR holds generated keys and the outbox: refused at once, in one line, when it takes no file.
  await assertDataDirWritable(config.DATA_DIR)
  let storage: StorageHealth | undefined
  // Requests being answered, which the jobs that yield to requests wait for (platform/jobs/jobs.ts);
  // a response closes once, sent or cut off.
  let answering = 0
  // The requests bulk answers (a first sync's pages) wait for (platform/precedence.ts).
  const precedence = new RequestPrecedence()
  app.addHook('onRequest', (request, reply, done) => {
    answering++
    const yields = request.routeOptions.config?.yieldsToRequests === true
    if (!yields) precedence.opened()
    reply.raw.once('close', () => {
      answering--
      if (!yields) precedence.closed()
    })
    done()
  })
  const platform = await openPlatform({
    config,
    clock,
    log: app.log,
    counters: a.metrics,
    onDatabaseError: (err) => storage?.reportDatabase(err),
    requestsInFlight: () => answering,
    closeLater: a.closeLater,
    mailTransport: a.deps.mailTransport,
    sms: a.deps.sms,
  })
  storage = new StorageHealth({
    clock,
    log: app.log,
    databaseName: platform.database.name,
    dataDir: path.resolve(config.DATA_DIR),
  })
  return { platform, storage, precedence }
}

type Shared = Platform & Awaited<ReturnType<typeof openCore>> & { clock: Clock; config: Config }

/**
 * What POST /tokens/verify, GET /tokens/check and their fast lane share: the token service, the answers,
 * the limits and the callers' budgets (per verify credential, an API key with scope tokens:verify, else
 * per address).
 */
function verifyWiring(a: Assembly, shared: Shared, limiters: ReturnType<typeof registerRateLimits>) {
  const limits = a.deps.verifyLimits ?? VERIFY_LIMITS
  const callers = verifyCallers({
    anonymous: limiters.limiter('POST /tokens/verify', perMinute(limits.anonymousPerMinute).rateLimit),
    credentials: limiters.limiter(
      'POST /tokens/verify credential',
      perMinute(a.config.VERIFY_CLIENT_RATE_LIMIT).rateLimit,
    ),
    // Look-ups of keys this instance has not seen, per address: as many as the anonymous budget.
    lookups: limiters.limiter(
      'POST /tokens/verify credential look-up',
      perMinute(limits.anonymousPerMinute).rateLimit,
    ),
    lookup: verifyCredentials(shared.apiKeys),
  })
  const checks = checkAnswers({ clock: shared.clock, cacheSeconds: a.config.CHECK_CACHE_SECONDS })
  const check = { tokens: shared.tokens, checks, callers }
  return { tokens: shared.tokens, answers: shared.answers, checks, callers, limits, check }
}

/** The dashboard's options: its TOTP step, the sealer of a sign-in between its steps, its passkeys. */
function dashboardOptions(shared: Shared) {
  const { db, clock, audit } = shared
  return {
    ...shared,
    totp: {
      db,
      clock,
      audit,
      sealer: shared.mfaSealer,
      backoff: shared.backoff,
      authEvents: shared.authEvents,
      passkeyPolicy: shared.passkeyPolicy,
    },
    signInSealer: shared.keys.sealer('dashboard-sign-in'),
    revocations: shared.authority.revocations,
    passkeys: { ...shared.passkeys, accounts: viewerAccounts(db) },
  }
}

/**
 * The shared parts of security: signing secrets and the edge key, the audit log, the token authority,
 * the one back-off, the MFA and passkey settings and the fresh-MFA guard of credential routes.
 */
async function openCore(app: FastifyInstance, a: Assembly, platform: Platform) {
  const { config, clock, metrics } = a
  const { db, redis } = platform
  // The signing secret, then the earlier ones that still verify; feature keys are derived from them.
  const secrets = [resolveSigningSecret(config, app.log), ...config.JWT_PREVIOUS_SECRETS]
  // The Ed25519 edge key: ticket codes (and EdDSA offline tokens) that devices check offline.
  const edgeKeys = await resolveEdgeKeys(config, app.log)
  const audit = createAuditLog(db, clock, app.log)
  // The token authority: codec, revocation list, token service; the command line uses the same.
  const authority = createTokenAuthority({
    db,
    clock,
    log: app.log,
    redis,
    config,
    sessionStores: SESSION_STORES,
    revocationLoadPace: a.deps.revocationLoadPace,
  })
  const tokens = await authority.serve({ secrets, edgeKeys, audit, metrics, config })
  a.closeLater(() => authority.stop())
  // Features get keys derived from the secrets for their purposes, never the secrets themselves.
  const keys = secretKeys(secrets)
  const backoff = createBackoff(clock, redis, config.REDIS_PREFIX)
  // The one cache of API keys: the partner API, verify's answers and verify credentials ask it.
  const apiKeys = createApiKeyCache({ db, clock, revocations: authority.revocations, metrics })
  const freshness = { clock, windowHours: config.MFA_FRESHNESS_WINDOW_HOURS }
  const { authEvents } = metrics
  // The one password sign-in's shared parts (platform/password-sign-in.ts).
  const passwords = { backoff, dummyHash: createDummyHash(), onCheck: () => metrics.passwordChecks.inc() }
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
    authEvents,
    passwords,
  }
  return {
    keys,
    edgeKeys,
    codes: new TicketCodes({ keys: edgeKeys }),
    audit,
    authEvents,
    authority,
    tokens,
    apiKeys,
    endSessions: authority.endSessions,
    answers: verifyAnswers(),
    backoff,
    passwords,
    mfaSealer: keys.sealer('mfa-secret'),
    freshness,
    passkeys,
    // Routes that create lasting credentials need fresh MFA while the administrator's MFA (TOTP or a
    // passkey) is on.
    protectCredentials: credentialGuard({
      db,
      tokens,
      audit,
      freshness,
      authEvents,
      hasPasskey: (id) => hasPasskey(passkeys, { kind: 'admin', id }),
    }),
    // PASSKEYS_REQUIRED_FOR: an administrator in scope who has a passkey gives it instead of a TOTP code.
    passkeyPolicy: (id: number, ip: string) => refuseTotpUnderPolicy(passkeys, id, ip),
    // What /auth/login tells an administrator in scope; read only where PASSKEYS_REQUIRED_FOR names
    // someone, so that sign-in costs no query more otherwise.
    loginPasskeyPolicy:
      passkeys.requiredFor === 'none'
        ? undefined
        : async (id: number) => {
            const account = await passkeys.accounts('admin', id)
            return account && policyFor(passkeys, account)
          },
  }
}

/**
 * HTTP plumbing every route shares: rate limits (audited once a minute per address and route), security
 * headers, compression, the OpenAPI document and /docs.
 */
async function registerPlumbing(app: FastifyInstance, a: Assembly, platform: Platform, audit: AuditLog) {
  const limiters = registerRateLimits(app, {
    clock: a.clock,
    redis: platform.redis,
    config: a.config,
    onLimited: (ip, route) =>
      void audit.record({ kind: 'rate_limit_hit', ip, outcome: 'denied', detail: { route } }),
  })
  // The limits' settings that decide who shares a budget, visible beside the refusals they cause.
  a.metrics
    .gauge({
      name: 'wristband_rate_limit_ipv6_prefix_length',
      help: 'Per-address limits count an IPv6 caller by this prefix of its address (64: a /64 shares one budget)',
      aggregator: 'max',
    })
    .set(IPV6_PREFIX_BITS)
  a.metrics
    .gauge({
      name: 'wristband_sms_global_limit_per_minute',
      help: 'SMS_GLOBAL_RATE_LIMIT: text messages a minute the fleet sends; past it wristband_sms_sends_total{outcome="refused"}',
      aggregator: 'max',
    })
    .set(a.config.SMS_GLOBAL_RATE_LIMIT)
  await registerSecurityHeaders(app, a.config.CORS_ORIGINS)
  // Large JSON answers (lists, the scanner feed) compressed as the client accepts; small ones (verify's,
  // which its fast lane answers before Fastify anyway) are not worth it. Brotli at a quality that keeps
  // a megabyte to milliseconds.
  await app.register(compress, {
    threshold: 1024,
    encodings: ['br', 'gzip'],
    brotliOptions: { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4 } },
  })
  await registerOpenApi(app, { version: INTERFACE_VERSION, release: SERVICE_VERSION }, FEATURE_OPENAPI)
  return limiters
}

/**
 * Operations: readiness, the drain the entry point starts on SIGTERM (beginDrain, then endKeepAlive
 * when its listener closes), and the dependency gauge.
 */
async function registerOps(
  app: FastifyInstance,
  a: Assembly,
  platform: Platform,
  storage: StorageHealth,
  revocations: Pick<RevocationStore, 'freshness'>,
) {
  const { database, redis } = platform
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
    revocations: () => revocations.freshness(),
    logLevel: a.config.LOG_LEVEL,
    ...(redis ? { redis } : {}),
  })
  // Off the public port unless a token guards it; METRICS_PORT serves it on a listener of its own.
  if (a.config.METRICS_TOKEN !== undefined && a.config.METRICS_PORT === undefined)
    await app.register(metricsRoutes, { metrics: a.metrics, token: a.config.METRICS_TOKEN })
  // 1 while a dependency answers (the lowest over workers); Redis at 0 means degraded, not unready.
  const dependencyUp = a.metrics.gauge({
    name: 'wristband_dependency_up',
    help: 'Whether a dependency answers and takes writes (1) or not (0): database, data_dir, redis',
    labelNames: ['dependency'] as const,
    aggregator: 'min',
  })
  a.metrics.onCollect(() => {
    const failed = storage.recent()
    dependencyUp.set({ dependency: 'database' }, failed?.path === database.name ? 0 : 1)
    dependencyUp.set({ dependency: 'data_dir' }, failed?.path === storage.dataDir ? 0 : 1)
    if (redis) dependencyUp.set({ dependency: 'redis' }, redis.status === 'ready' ? 1 : 0)
  })
  return { keepAliveEnded: () => keepAliveEnded }
}
