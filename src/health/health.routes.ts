import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { quietRouteLevel } from '../platform/logging.js'

/**
 * The liveness probes: answered by the process itself, whose event loop runs if it answers at all.
 * They check no dependency, so that an outage of the database or Redis (which /ready reports, taking
 * the instance out of the balancer) never has an orchestrator restart every instance. `GET /live` is
 * the probe the Kubernetes manifests use; `GET /health` answers the same for the monitors that use it.
 */
export const healthRoutes: FastifyPluginAsyncTypebox<{ logLevel: string }> = async (app, { logLevel }) => {
  for (const [url, summary, doc] of [
    [
      '/live',
      'Liveness probe: 200 while the process runs; no dependency is checked',
      {
        operationId: 'getLive',
        returns:
          'The process is alive: it answers. Neither the database nor Redis is asked, so an outage of either does not make an orchestrator restart the instance (GET /ready answers 503 instead)',
        response: { status: 'ok' },
      },
    ],
    [
      '/health',
      'Liveness probe (the same answer as GET /live)',
      {
        operationId: 'getHealth',
        returns: 'The process is alive (as GET /live)',
        response: { status: 'ok' },
      },
    ],
  ] as const)
    app.get(
      url,
      {
        // Probed every few seconds: its request lines at debug, not info.
        logLevel: quietRouteLevel(logLevel),
        schema: {
          tags: ['health'],
          summary,
          response: { 200: Type.Object({ status: Type.Literal('ok') }) },
          doc,
        },
      },
      async () => ({ status: 'ok' as const }),
    )
}
