import { randomUUID } from 'node:crypto'
import path from 'node:path'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { LRUCache } from 'lru-cache'
import type { DestinationStream } from 'pino'
import { adminRoutes } from './admin/admin.routes.js'
import { apiKeyResolver } from './api-keys/api-key.credential.js'
import { createAuditLog } from './audit/audit.store.js'
import { authRoutes } from './auth/auth.routes.js'
import { dashboardRoutes } from './dashboard/dashboard.routes.js'
import { healthRoutes } from './health/health.routes.js'
import { createMetrics, type Metrics } from './metrics/metrics.js'
import { instrumentRequests, metricsRoutes } from './metrics/metrics.routes.js'
import { opsRoutes } from './ops/ops.routes.js'
import { createBackoff } from './platform/backoff.js'
import { type Clock, systemClock } from './platform/clock.js'
import type { Config } from './platform/config.js'
import { openDatabase } from './platform/db/database.js'
import { registerErrorHandler } from './platform/error-handler.js'
import { JobRunner } from './platform/jobs/jobs.js'
import { loggerOptions } from './platform/logging.js'
import { MAIL_JOB, type MailTransport, mailJob, outboxTransport, smtpTransport } from './platform/mail.js'
import { createDummyHash } from './platform/passwords.js'
import { registerRateLimit } from './platform/rate-limit.js'
import { connectRedis, createRedis } from './platform/redis.js'
import { ErrorBody, HTTPValidationError, RateLimited } from './platform/schemas.js'
import { registerSecurityHeaders } from './platform/security-headers.js'
import { createValidatorCompiler } from './platform/validation.js'
import { JwtCodec } from './tokens/jwt.js'
import { memoryRevocations, redisRevocations } from './tokens/revocations.js'
import { resolveSigningSecret } from './tokens/secret.js'
import { TokenService } from './tokens/token.service.js'
import { tokenVerifyRoutes } from './tokens/tokens.routes.js'

export interface AppDependencies {
  /** Time source; tests pass a controllable one. */
  clock?: Clock
  /** Where log lines go (stdout when absent); tests capture them. */
  logStream?: DestinationStream
  /** Mail delivery; SMTP_URL or the outbox folder when absent. */
  mailTransport?: MailTransport
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/

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
    bodyLimit: config.BODY_LIMIT_BYTES,
    genReqId: (req) => {
      const given = req.headers['x-request-id']
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
    },
    requestIdHeader: false,
    return503OnClosing: true,
  }
  const app = Fastify(options).withTypeProvider<TypeBoxTypeProvider>()

  const metrics = createMetrics()
  app.decorate('metrics', metrics)
  instrumentRequests(app, metrics)
  app.setValidatorCompiler(createValidatorCompiler())
  registerErrorHandler(app)
  app.decorateRequest('auth', null)
  app.addSchema(ErrorBody)
  app.addSchema(HTTPValidationError)
  app.addSchema(RateLimited)
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id)
  })

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
  const database = await openDatabase(config.databaseUrl, {
    schema: config.DATABASE_SCHEMA,
    onError: () => metrics.dbErrors.inc(),
  })
  closers.push(() => database.close())
  const { db } = database
  const redis = config.REDIS_URL ? createRedis(config.REDIS_URL, app.log) : undefined
  if (redis) {
    redis.on('error', () => metrics.redisErrors.inc())
    closers.push(() => redis.disconnect())
  }
  await database.migrate()
  if (redis) await connectRedis(redis)

  const jwt = new JwtCodec({
    secret: resolveSigningSecret(config, app.log),
    previousSecrets: config.JWT_PREVIOUS_SECRETS,
    audience: config.JWT_AUDIENCE,
    issuer: config.JWT_ISSUER,
    clock,
  })
  const revocations = redis
    ? redisRevocations({ db, clock }, redis, config.REDIS_PREFIX, app.log)
    : memoryRevocations({ db, clock })
  await revocations.start()
  closers.push(() => revocations.stop())
  const audit = createAuditLog(db, clock, app.log)
  const tokens = new TokenService({ db, jwt, revocations, clock, audit, config, metrics })
  const apiKeys = apiKeyResolver(db, clock)
  tokens.registerCredential(apiKeys.prefix, apiKeys.resolve)
  const dummyHash = createDummyHash()
  const backoff = createBackoff(clock, redis, config.REDIS_PREFIX)
  const jobs = new JobRunner({
    db,
    dialect: database.dialect,
    clock,
    log: app.log,
    pollMs: config.JOBS_POLL_MS,
  })
  const mail =
    deps.mailTransport ??
    (config.SMTP_URL
      ? smtpTransport(config.SMTP_URL, config.MAIL_FROM)
      : outboxTransport(path.join(config.DATA_DIR, 'outbox', 'mail'), config.MAIL_FROM))
  jobs.register(MAIL_JOB, mailJob(mail))
  closers.push(() => jobs.stop())

  // One audit record per address and route per minute of excess, however many requests it sends.
  const recentlyLimited = new LRUCache<string, true>({ max: 10_000, ttl: 60_000 })
  await registerRateLimit(app, {
    ...(redis ? { redis } : {}),
    prefix: config.REDIS_PREFIX,
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
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'wristband',
        version: '0.1.0',
        description: 'Authentication, token and ticket-partner service of the event platform.',
      },
      components: {
        securitySchemes: {
          OAuth2PasswordBearer: {
            type: 'oauth2',
            flows: { password: { tokenUrl: '/auth/login', scopes: {} } },
          },
        },
      },
    },
  })
  // swagger-ui sets the page's own CSP (its scripts and styles come from the service itself).
  await app.register(swaggerUi, { routePrefix: '/docs', staticCSP: true })
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger())

  await app.register(healthRoutes)
  await app.register(authRoutes, { db, tokens, audit, dummyHash, backoff })
  await app.register(tokenVerifyRoutes, { tokens })
  await app.register(adminRoutes, { tokens, db })
  await app.register(dashboardRoutes, { db, clock, tokens, audit, backoff, dummyHash })
  await app.register(opsRoutes, { database, ...(redis ? { redis } : {}) })
  // Off the public port unless a token guards it; METRICS_PORT serves it on a listener of its own.
  if (config.METRICS_TOKEN !== undefined && config.METRICS_PORT === undefined)
    await app.register(metricsRoutes, { metrics, token: config.METRICS_TOKEN })

  app.addHook('onReady', async () => jobs.start())
}
