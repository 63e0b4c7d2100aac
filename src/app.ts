import { isUtf8 } from 'node:buffer'
import { randomUUID } from 'node:crypto'
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import path from 'node:path'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify'
import { LRUCache } from 'lru-cache'
import type { DestinationStream } from 'pino'
import { adminRoutes } from './admin/admin.routes.js'
import { createApiKeyResolver } from './api-keys/api-key.credential.js'
import { apiKeyRoutes } from './api-keys/api-keys.routes.js'
import { auditRoutes } from './audit/audit.routes.js'
import { createAuditLog } from './audit/audit.store.js'
import { authRoutes } from './auth/auth.routes.js'
import { consumerRoutes } from './consumers/consumers.routes.js'
import { ConsumerService } from './consumers/consumers.service.js'
import { PhoneCodes } from './consumers/phone-codes.js'
import { dashboardRoutes } from './dashboard/dashboard.routes.js'
import { deviceRoutes } from './devices/devices.routes.js'
import { DeviceService, SESSION_PREFIX } from './devices/devices.service.js'
import { edgeRoutes } from './edge/edge.routes.js'
import { jwtEdgeOptions, resolveEdgeKeys } from './edge/edge-keys.js'
import { TicketCodes } from './edge/ticket-codes.js'
import { healthRoutes } from './health/health.routes.js'
import { holderRoutes } from './holder/holder.routes.js'
import { idpRoutes } from './idp/idp.routes.js'
import { IdpVerifier } from './idp/idp.verifier.js'
import { countSends, createMetrics, type Metrics } from './metrics/metrics.js'
import { instrumentRequests, metricsRoutes } from './metrics/metrics.routes.js'
import { mfaRoutes } from './mfa/mfa.routes.js'
import { offlineRoutes } from './offline/offline.routes.js'
import { indexRoutes } from './ops/index.routes.js'
import { opsRoutes } from './ops/ops.routes.js'
import { partnerRoutes } from './partner/partner.routes.js'
import { TRANSFER_MAIL_JOB, transferMailJob } from './partner/transfer-mail.js'
import { passwordResetRoutes } from './password-reset/password-reset.routes.js'
import { RESET_MAIL_JOB, resetMailJob } from './password-reset/reset-mail.js'
import { createBackoff } from './platform/backoff.js'
import { dropUnusableForwardedFor } from './platform/client-address.js'
import { type Clock, systemClock } from './platform/clock.js'
import type { Config } from './platform/config.js'
import { openDatabase, servicePoolOptions } from './platform/db/database.js'
import { registerErrorHandler } from './platform/error-handler.js'
import { createHttpClient } from './platform/http-client.js'
import { JobRunner } from './platform/jobs/jobs.js'
import { createSealer, deriveKey } from './platform/keys.js'
import { loggerOptions, logListeningUrls } from './platform/logging.js'
import { MAIL_JOB, type MailTransport, mailJob, outboxTransport, smtpTransport } from './platform/mail.js'
import { docsUiTheme, finishDocument, type OpenApiDocument } from './platform/openapi.js'
import { createDummyHash } from './platform/passwords.js'
import {
  memoryCounters,
  redisCounters,
  registerRateLimit,
  syncedRedisCounters,
} from './platform/rate-limit.js'
import { connectRedis, createRedis } from './platform/redis.js'
import { ErrorBody, HTTPValidationError, RateLimited } from './platform/schemas.js'
import { registerDocsPolicy, registerSecurityHeaders, securityHeaders } from './platform/security-headers.js'
import { createSmsSender, type SmsSender } from './platform/sms.js'
import { databaseUnavailable } from './platform/startup.js'
import { createValidatorCompiler } from './platform/validation.js'
import { ticketRoutes } from './tickets/tickets.routes.js'
import { TicketsService } from './tickets/tickets.service.js'
import { JwtCodec } from './tokens/jwt.js'
import { memoryRevocations, redisRevocations } from './tokens/revocations.js'
import { resolveSigningSecret } from './tokens/secret.js'
import { TokenService } from './tokens/token.service.js'
import { tokenVerifyRoutes } from './tokens/verify.routes.js'
import { verifyAnswers } from './tokens/verify-answer.js'
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

/** The API's version: the OpenAPI document's and the one GET / shows. */
const SERVICE_VERSION = '0.1.0'

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/

/** The caller's X-Request-Id when it is a sane one, else a fresh UUID. */
function requestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id']
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
}

type Lane = (
  req: IncomingMessage,
  res: ServerResponse,
  fastify: (req: IncomingMessage, res: ServerResponse) => void,
) => boolean

/**
 * Builds the whole service on its dependencies: opens the database (and applies migrations),
 * connects Redis when configured, and registers every feature. `listen()` is the caller's.
 */
export async function buildApp(config: Config, deps: AppDependencies = {}): Promise<FastifyInstance> {
  const clock = deps.clock ?? systemClock
  const options: FastifyServerOptions = {
    logger: loggerOptions(config.LOG_LEVEL, deps.logStream),
    // Fastify also takes a hop count here (proxy-addr semantics); its type declaration omits it.
    trustProxy: config.TRUST_PROXY as FastifyServerOptions['trustProxy'],
    // Fastify's one hook that runs before a request is logged, routed or rate limited: the URL stays
    // as it is; an X-Forwarded-For that names no IP address (or is overly long) is dropped here.
    rewriteUrl: (req) => {
      dropUnusableForwardedFor(req)
      return req.url ?? '/'
    },
    bodyLimit: config.BODY_LIMIT_BYTES,
    genReqId: requestId,
    requestIdHeader: false,
    return503OnClosing: true,
    // Errors the router raises before any route runs get the documented body too: an undecodable
    // URL is 400; a path segment longer than any id or token the service issues names nothing (404).
    frameworkErrors: (err, _request, reply) => {
      const r = reply as unknown as FastifyReply
      return err.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? r.code(404).send({ detail: 'Not Found' })
        : r.code(400).send({ detail: 'Malformed request URL' })
    },
  }
  // The verify lane (see tokens/verify-lane.ts) sits in front of Fastify on the same server; it is
  // set once the app is assembled. At debug and trace the route logs every request, which the lane
  // does not: it is off there.
  let lane: Lane | undefined
  const laneWanted = config.VERIFY_FAST_LANE && config.LOG_LEVEL !== 'debug' && config.LOG_LEVEL !== 'trace'
  if (laneWanted) {
    options.serverFactory = (handler, fastifyOptions) => {
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
    }
  }
  const app = Fastify(options).withTypeProvider<TypeBoxTypeProvider>()
  if (config.NODE_ENV === 'production' && config.TRUST_PROXY === true)
    app.log.warn(
      'TRUST_PROXY=true: every peer may name the client address in X-Forwarded-For, so a client that reaches ' +
        'the service directly chooses its own address (per-address limits, audit); list the proxies instead',
    )

  logListeningUrls(app)
  const metrics = createMetrics()
  app.decorate('metrics', metrics)
  instrumentRequests(app, metrics)
  app.setValidatorCompiler(createValidatorCompiler())
  // Every body is JSON: any other content type is 415, including text/plain, which Fastify parses by
  // default. Bytes that are not UTF-8 are malformed JSON (json_invalid), not silently replaced by U+FFFD.
  app.removeContentTypeParser(['text/plain', 'application/json'])
  const parseJson = app.getDefaultJsonParser('error', 'error')
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer
    if (!isUtf8(bytes)) {
      done(new SyntaxError('request body is not valid UTF-8'), undefined)
      return
    }
    // A leading byte order mark is skipped, as the TextDecoder this replaced did (RFC 8259 allows it).
    const bom = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf
    parseJson(request, bytes.toString('utf8', bom ? 3 : 0), done)
  })
  registerErrorHandler(app)
  app.decorateRequest('auth', null)
  app.addSchema(ErrorBody)
  app.addSchema(HTTPValidationError)
  app.addSchema(RateLimited)
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    done()
  })

  // Resources are closed in reverse order of opening, when the app closes or fails to build.
  const closers: (() => unknown)[] = []
  const closeAll = async () => {
    for (const close of closers.splice(0).reverse()) await close()
  }
  app.addHook('onClose', closeAll)
  try {
    const setLane = laneWanted
      ? (l: Lane) => {
          lane = l
        }
      : undefined
    await assemble(app, config, clock, deps, metrics, closers, setLane)
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
  const jwt = new JwtCodec({
    secret: secrets[0]!,
    previousSecrets: config.JWT_PREVIOUS_SECRETS,
    audience: config.JWT_AUDIENCE,
    issuer: config.JWT_ISSUER,
    clock,
    edge: jwtEdgeOptions(edgeKeys, config.OFFLINE_TOKEN_ALG === 'EdDSA'),
  })
  const codes = new TicketCodes({ keys: edgeKeys })
  const revocationDeps = { db, clock, pollMs: config.REVOCATION_POLL_MS, log: app.log }
  const revocations = redis
    ? redisRevocations(revocationDeps, redis, config.REDIS_PREFIX, app.log)
    : memoryRevocations(revocationDeps)
  await revocations.start()
  closers.push(() => revocations.stop())
  const audit = createAuditLog(db, clock, app.log)
  const tokens = new TokenService({ db, jwt, revocations, clock, audit, config, metrics })
  const answers = verifyAnswers()
  const apiKeyResolver = createApiKeyResolver(db, clock, revocations)
  tokens.registerCredential(apiKeyResolver.prefix, apiKeyResolver.resolve)
  const dummyHash = createDummyHash()
  const backoff = createBackoff(clock, redis, config.REDIS_PREFIX)
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

  // One audit record per address and route per minute of excess, however many requests it sends.
  const recentlyLimited = new LRUCache<string, true>({ max: 10_000, ttl: 60_000 })
  const limiters = registerRateLimit(app, {
    countersFor: (route) =>
      !redis
        ? memoryCounters(clock)
        : config.RATE_LIMIT_SYNC_MS === 0
          ? redisCounters(redis, `${config.REDIS_PREFIX}rl:${route}|`)
          : syncedRedisCounters(
              redis,
              `${config.REDIS_PREFIX}rl:${route}|`,
              clock,
              config.RATE_LIMIT_SYNC_MS,
            ),
    onExceeded: (ip, route) => {
      metrics.rateLimitRejections.inc({ route })
      const key = `${ip} ${route}`
      if (recentlyLimited.has(key)) return
      recentlyLimited.set(key, true)
      void audit.record({ kind: 'rate_limit_hit', ip, outcome: 'denied', detail: { route } })
    },
  })

  await registerSecurityHeaders(app, config.CORS_ORIGINS)
  await app.register(swagger, {
    // Shared schemas keep their names (HTTPValidationError, ...) in the document instead of def-N.
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`) },
    // operationIds, examples, response descriptions and error codes: src/platform/openapi-operations.ts.
    transformObject: (built) =>
      'openapiObject' in built
        ? (finishDocument(built.openapiObject as unknown as OpenApiDocument) as typeof built.openapiObject)
        : built.swaggerObject,
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'wristband',
        version: SERVICE_VERSION,
        description: 'Authentication, token and ticket-partner service of the event platform.',
      },
      components: {
        securitySchemes: {
          // The dashboard's own JSON, read by its pages with the session cookie of /dashboard/login.
          DashboardSession: { type: 'apiKey', in: 'cookie', name: 'wb_session' },
          OAuth2PasswordBearer: {
            type: 'oauth2',
            flows: { password: { tokenUrl: '/auth/login', scopes: {} } },
          },
          APIKeyHeader: { type: 'apiKey', in: 'header', name: 'api_key' },
        },
      },
    },
  })
  // The docs pages get their own CSP (their scripts and styles come from the service itself).
  registerDocsPolicy(app, '/docs')
  await app.register(swaggerUi, { routePrefix: '/docs', ...docsUiTheme })
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())

  await app.register(healthRoutes)
  await app.register(indexRoutes, { version: SERVICE_VERSION })
  await app.register(authRoutes, { db, tokens, audit, dummyHash, backoff })
  await app.register(tokenVerifyRoutes, { tokens, answers, logLevel: config.LOG_LEVEL })
  await app.register(adminRoutes, { tokens, db })
  await app.register(dashboardRoutes, { db, clock, tokens, audit, backoff, dummyHash, runDueJobs })
  await app.register(mfaRoutes, {
    db,
    clock,
    tokens,
    audit,
    sealer: createSealer(secrets, 'mfa-secret'),
    backoff,
    freshness: { clock, windowHours: config.MFA_FRESHNESS_WINDOW_HOURS },
  })
  await app.register(passwordResetRoutes, { db, clock, tokens, audit, config })
  await app.register(apiKeyRoutes, { db, clock, tokens, audit })
  await app.register(offlineRoutes, { db, tokens, audit })
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
  sms = countSends(sms, metrics.smsSends)
  const consumers = new ConsumerService({
    db,
    clock,
    tokens,
    audit,
    dummyHash,
    backoff,
    log: app.log,
    sms,
    codes: new PhoneCodes({ db, clock, key: deriveKey(secrets[0]!, 'phone-codes') }),
  })
  closers.push(() => consumers.drain())
  await app.register(consumerRoutes, { consumers, tokens })
  const verifier = new IdpVerifier({
    issuers: config.IDP_ISSUERS,
    clock,
    cooldownMs: config.IDP_JWKS_COOLDOWN_SECONDS * 1000,
    timeoutMs: config.IDP_HTTP_TIMEOUT_SECONDS * 1000,
  })
  await app.register(idpRoutes, { db, clock, tokens, audit, verifier })
  const devices = new DeviceService({
    db,
    clock,
    tokens,
    audit,
    dummyHash,
    backoff,
    sealer: createSealer(secrets, 'operator-session'),
    keysRequired: config.DEVICE_KEYS_REQUIRED,
  })
  tokens.registerCredential(SESSION_PREFIX, (token) => devices.resolveSession(token))
  tokens.onLogout(async (caller) => {
    if (caller.role === 'operator') await devices.endSession(Number(caller.sub))
  })
  await app.register(deviceRoutes, { devices, tokens })
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
    tickets: new TicketsService({ db, clock, runDueJobs }),
    offlineHours: config.OFFLINE_TOKEN_EXPIRE_HOURS,
  })
  await app.register(holderRoutes, { db, clock, tokens, codes })

  if (setLane) {
    let closing = false
    app.addHook('preClose', async () => {
      closing = true
    })
    replayLaneBodies(app)
    setLane(
      verifyLane({
        tokens,
        answers,
        limiter: limiters.get('POST /tokens/verify')!,
        metrics,
        securityHeaders: securityHeaders().api,
        trustProxy: config.TRUST_PROXY,
        bodyLimit: config.BODY_LIMIT_BYTES,
        cors: config.CORS_ORIGINS.length > 0,
        requestId,
        closing: () => closing,
      }),
    )
  }

  app.addHook('onReady', async () => jobs.start())
}
