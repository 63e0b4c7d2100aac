import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { quietRouteLevel } from '../platform/logging.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
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

export interface OpsRoutesDeps extends ReadinessDeps {
  /** Whether the instance is draining (see beginDrain). */
  draining: () => boolean
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
          'database). The body gives the state of each dependency. GET /health stays the liveness probe.',
        response: { 200: ReadinessBody, 503: ReadinessBody, ...errorResponses() },
      },
    },
    async (_request, reply) => {
      const { ready, degraded, checks } = await checkReadiness(deps)
      if (deps.draining()) return reply.code(503).send({ status: 'unavailable', shutting_down: true, checks })
      if (!ready) return reply.code(503).send({ status: 'unavailable', checks })
      return reply.code(200).send({ status: degraded ? 'degraded' : 'ready', checks })
    },
  )
}
