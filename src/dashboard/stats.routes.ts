import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ForbiddenError } from '../platform/errors.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { hasScope } from '../tokens/claims.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import { WebhookDeliveries } from '../webhooks/webhooks.service.js'
import { eventStats } from './dashboard.openapi.js'
import { loadSession, sessionOf } from './kit/pages.js'
import type { SessionDeps } from './session.service.js'
import { EventIdParams, EventStats, StatsQuery } from './stats.schemas.js'
import { figuresFor, sharedEventStats } from './stats.service.js'
import { canSeeEvent } from './viewers.js'

export interface StatsRoutesDeps extends SessionDeps {
  tokens: TokenService
}

/**
 * An event's figures as JSON: for bearer tokens at `GET /events/{event_id}/stats`, and for the
 * signed-in event page, which refreshes itself from them. One shared reader serves both. Both keep the
 * service's JSON error bodies.
 */
export const statsRoutes: FastifyPluginAsyncTypebox<StatsRoutesDeps> = async (app, deps) => {
  const readFigures = sharedEventStats(deps)
  const webhooks = new WebhookDeliveries(deps)

  app.get(
    '/events/:event_id/stats',
    {
      config: perMinute(120),
      ...protect(deps.tokens),
      schema: {
        tags: ['dashboard'],
        summary: 'Figures of one event: ticket types, balances, uses, webhook health',
        description: 'Needs `reports:read` on the event. The dashboard page reads the same figures.',
        security: [{ OAuth2PasswordBearer: [] }],
        params: EventIdParams,
        querystring: StatsQuery,
        response: { 200: EventStats, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'getEventStats',
          returns: 'The figures of the event',
          response: eventStats,
        },
      },
    },
    async (request) => {
      const { event_id } = request.params
      if (!hasScope(claimsOf(request), event_id, 'reports:read')) throw new ForbiddenError()
      return readFigures(event_id, request.query.range ?? '24h')
    },
  )

  app.get(
    '/dashboard/api/events/:event_id/stats',
    {
      config: perMinute(120),
      preParsing: loadSession(deps, true),
      schema: {
        tags: ['dashboard'],
        summary: 'Figures of one event for the signed-in dashboard page (session cookie)',
        security: [{ DashboardSession: [] }],
        params: EventIdParams,
        querystring: StatsQuery,
        response: { 200: EventStats, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'getDashboardEventStats',
          returns: 'The figures of the event',
          response: eventStats,
        },
      },
    },
    async (request, reply) => {
      const { event_id } = request.params
      const session = sessionOf(request, (viewer) => canSeeEvent(viewer, event_id))
      reply.header('cache-control', 'no-store')
      return figuresFor(deps, session.viewer, event_id, request.query.range ?? '24h', readFigures, webhooks)
    },
  )
}
