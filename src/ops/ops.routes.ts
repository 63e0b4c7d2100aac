import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { quietRouteLevel } from '../platform/logging.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import type { RevocationFreshness } from '../tokens/revocations.js'
import { checkReadiness, type ReadinessDeps } from './readiness.js'

const DependencyState = Type.Object({
  status: Type.Union([Type.Literal('up'), Type.Literal('down'), Type.Literal('not_configured')]),
  reason: Type.Optional(Type.String()),
})

const ReadinessBody = Type.Object({
  /** `degraded`: serving (200), but Redis is down; the service works without it. */
  status: Type.Union([Type.Literal('ready'), Type.Literal('degraded'), Type.Literal('unavailable')]),
  /** Present while the instance drains after SIGTERM: it still serves, but wants no new traffic. */
  shutting_down: Type.Optional(Type.Literal(true)),
  checks: Type.Object({
    database: Type.Object({
      status: Type.Union([Type.Literal('up'), Type.Literal('down')]),
      dialect: Type.String(),
      reason: Type.Optional(Type.String()),
      pending_migrations: Type.Optional(Type.Array(Type.String())),
    }),
    data_dir: DependencyState,
    redis: DependencyState,
  }),
})

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Marks the instance as shutting down: /ready answers 503 from now on while every other route
     * keeps answering, so a load balancer takes it out of rotation before the listener closes.
     */
    beginDrain(): void
    /**
     * The listener has closed (the end of the drain): every answer from now on carries
     * `connection: close`, so no kept-alive connection is left to be cut.
     */
    endKeepAlive(): void
  }
}

const VerifyReadinessBody = Type.Object({
  status: Type.Union([Type.Literal('ready'), Type.Literal('unavailable')]),
  shutting_down: Type.Optional(Type.Literal(true)),
  checks: Type.Object({
    revocations: Type.Object({
      status: Type.Union([Type.Literal('fresh'), Type.Literal('stale')]),
      via: Type.Union([Type.Literal('feed'), Type.Literal('database'), Type.Literal('none')], {
        description:
          '`feed`: the Redis revocation feed, followed without a break since the last read of the database; ' +
          '`database`: a read of the revocations a few seconds ago at most; `none`: neither',
      }),
      last_read_seconds_ago: Type.Number({
        description: "Since the last read of the database's revocations",
      }),
    }),
  }),
})

export interface OpsRoutesDeps extends ReadinessDeps {
  /** Whether the instance is draining (see beginDrain). */
  draining: () => boolean
  /** Whether this instance's revocation list is complete without the database (GET /ready/verify). */
  revocations: () => RevocationFreshness
  /** LOG_LEVEL: probes are logged at debug (their request lines left out at info). */
  logLevel: string
}

export const opsRoutes: FastifyPluginAsyncTypebox<OpsRoutesDeps> = async (app, deps) => {
  app.get(
    '/ready',
    {
      // Probes come every few seconds, several instances behind one prober address; each one costs
      // two small queries, so an open endpoint must not be a way to load the database.
      config: perMinute(600),
      logLevel: quietRouteLevel(deps.logLevel),
      schema: {
        tags: ['health'],
        summary: 'Readiness probe: 200 while the instance can serve (the database answers and takes writes)',
        description:
          '503 while the database is unreachable or cannot be written (read-only, disk full: `reason` ' +
          'says which), DATA_DIR cannot be written, or migrations are pending, and from the moment the ' +
          'instance is told to stop (SIGTERM; `shutting_down` is then true). Redis down is `degraded`: ' +
          '200, since the service works without it (rate limits fail open, revocations come from the ' +
          'database). The body gives the state of each dependency. GET /live is the liveness probe: it checks no dependency.',
        response: { 200: ReadinessBody, 503: ReadinessBody, ...errorResponses() },
        doc: {
          operationId: 'getReadiness',
          returns: 'The database (and Redis, when configured) answer',
          response: {
            status: 'ready',
            checks: {
              database: { status: 'up', dialect: 'postgres' },
              data_dir: { status: 'up' },
              redis: { status: 'up' },
            },
          },
        },
      },
    },
    async (_request, reply) => {
      const { ready, degraded, checks } = await checkReadiness(deps)
      if (deps.draining()) return reply.code(503).send({ status: 'unavailable', shutting_down: true, checks })
      if (!ready) return reply.code(503).send({ status: 'unavailable', checks })
      return reply.code(200).send({ status: degraded ? 'degraded' : 'ready', checks })
    },
  )

  app.get(
    '/ready/verify',
    {
      config: perMinute(600),
      logLevel: quietRouteLevel(deps.logLevel),
      schema: {
        tags: ['health'],
        summary: 'Readiness of the verify lane: 200 while the instance can verify, the database down or not',
        description:
          'For a balancer that routes POST /tokens/verify, /tokens/check and POST /oauth2/introspect apart ' +
          '(deploy/haproxy.cfg): they are answered from memory (the signing keys, loaded at start, and the ' +
          'revocation list) and go on while the database is unreachable, when GET /ready is 503. 200 while ' +
          'the revocation list in memory is known to be complete: the Redis revocation feed is followed ' +
          'without a break since the last read of the database (no revocation can be written while the ' +
          'database is down, and each one is published as it is written), or, without the feed, the ' +
          'database was read a few seconds ago at most (3 polls, at least 5 s). 503 otherwise, and from ' +
          'the moment the instance is told to stop. Touches neither the database nor Redis.',
        response: { 200: VerifyReadinessBody, 503: VerifyReadinessBody, ...errorResponses() },
        doc: {
          operationId: 'getVerifyReadiness',
          returns: 'The instance can verify: its revocation list is complete without the database',
          response: {
            status: 'ready',
            checks: { revocations: { status: 'fresh', via: 'feed', last_read_seconds_ago: 0.4 } },
          },
        },
      },
    },
    async (_request, reply) => {
      const { fresh, via, lastReadAgoMs } = deps.revocations()
      const checks = {
        revocations: {
          status: fresh ? ('fresh' as const) : ('stale' as const),
          via,
          last_read_seconds_ago: Math.max(0, Math.round(lastReadAgoMs / 100) / 10),
        },
      }
      if (deps.draining()) return reply.code(503).send({ status: 'unavailable', shutting_down: true, checks })
      return reply.code(fresh ? 200 : 503).send({ status: fresh ? 'ready' : 'unavailable', checks })
    },
  )
}
