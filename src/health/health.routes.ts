import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { quietRouteLevel } from '../platform/logging.js'

export const healthRoutes: FastifyPluginAsyncTypebox<{ logLevel: string }> = async (app, { logLevel }) => {
  app.get(
    '/health',
    {
      // Probed every few seconds: its request lines at debug, not info.
      logLevel: quietRouteLevel(logLevel),
      schema: {
        tags: ['health'],
        summary: 'Liveness probe',
        response: { 200: Type.Object({ status: Type.Literal('ok') }) },
      },
    },
    async () => ({ status: 'ok' as const }),
  )
}
