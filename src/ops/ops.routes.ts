import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Redis } from 'ioredis'
import { Type } from 'typebox'
import type { DatabaseHandle } from '../platform/db/database.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { checkReadiness } from './readiness.js'

const DependencyState = Type.Object({
  status: Type.Union([Type.Literal('up'), Type.Literal('down'), Type.Literal('not_configured')]),
  reason: Type.Optional(Type.String()),
})

const ReadinessBody = Type.Object({
  status: Type.Union([Type.Literal('ready'), Type.Literal('unavailable')]),
  checks: Type.Object({
    database: Type.Object({
      status: Type.Union([Type.Literal('up'), Type.Literal('down')]),
      dialect: Type.String(),
      reason: Type.Optional(Type.String()),
      pending_migrations: Type.Optional(Type.Array(Type.String())),
    }),
    redis: DependencyState,
  }),
})

export const opsRoutes: FastifyPluginAsyncTypebox<{ database: DatabaseHandle; redis?: Redis }> = async (
  app,
  deps,
) => {
  app.get(
    '/ready',
    {
      // Probes come every few seconds, several instances behind one prober address; each one costs
      // two small queries, so an open endpoint must not be a way to load the database.
      config: perMinute(600),
      schema: {
        tags: ['health'],
        summary: 'Readiness probe: 200 when the database (and Redis, when configured) answer',
        description:
          '503 while the database or a configured Redis is unreachable, or migrations are pending; ' +
          'the body gives the state of each dependency. GET /health stays the liveness probe.',
        response: { 200: ReadinessBody, 503: ReadinessBody, ...errorResponses() },
      },
    },
    async (_request, reply) => {
      const { ready, checks } = await checkReadiness(deps)
      return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'unavailable', checks })
    },
  )
}
