import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { safeEqual } from '../platform/digest.js'
import { registerErrorHandler } from '../platform/error-handler.js'
import { UnauthorizedError } from '../platform/errors.js'
import { perMinute } from '../platform/rate-limit.js'
import { ErrorBody, errorResponses, HTTPValidationError, RateLimited } from '../platform/schemas.js'
import { bearerToken } from '../tokens/guard.js'
import type { Metrics } from './metrics.js'

/**
 * Times every answered request, labelled by route template (never the raw URL, whose ids would make
 * one series per resource). Added on the root instance so it sees every route, the 404s included.
 */
export function instrumentRequests(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched'
    metrics.observeRequest(request.method, route, reply.statusCode, reply.elapsedTime / 1000)
    // Every 429, whoever refused: the per-address limits, an account's back-off, a quota (password
    // reset e-mails, first syncs). The verify lane answers only 200s; its 429s come through here.
    if (reply.statusCode === 429) metrics.rateLimitRejections.inc({ route })
    done()
  })
}

function checkToken(request: FastifyRequest, token: string | undefined): void {
  if (token === undefined) return
  const given = bearerToken(request)
  if (given === null || !safeEqual(given, token)) throw new UnauthorizedError()
}

export interface MetricsRouteDeps {
  metrics: Metrics
  /** METRICS_TOKEN: when set, scrapes must present it as a bearer token. */
  token: string | undefined
}

/** GET /metrics in the Prometheus text format. */
export const metricsRoutes: FastifyPluginAsyncTypebox<MetricsRouteDeps> = async (app, { metrics, token }) => {
  app.get(
    '/metrics',
    {
      // Scrapers call every 10–60 s; this leaves room for several of them behind one address.
      config: perMinute(120),
      schema: {
        tags: ['ops'],
        summary: 'Prometheus metrics (bearer METRICS_TOKEN, or only on METRICS_PORT)',
        response: {
          200: {
            description: 'Prometheus text exposition format',
            content: { 'text/plain': { schema: Type.String() } },
          },
          ...errorResponses(401),
        },
      },
    },
    async (request, reply) => {
      checkToken(request, token)
      const { body, contentType } = await metrics.scrape()
      return reply.type(contentType).send(body)
    },
  )
}

/**
 * The separate listener of METRICS_PORT: only /metrics, so a port that is reachable from the
 * monitoring network exposes nothing else. `listen()` is the caller's, as for the app.
 */
export async function buildMetricsServer(
  deps: MetricsRouteDeps & { logger: FastifyBaseLogger },
): Promise<FastifyInstance> {
  const server = Fastify({ loggerInstance: deps.logger.child({ listener: 'metrics' }) })
  registerErrorHandler(server)
  for (const schema of [ErrorBody, HTTPValidationError, RateLimited]) server.addSchema(schema)
  await server.register(metricsRoutes, { metrics: deps.metrics, token: deps.token })
  return server
}
