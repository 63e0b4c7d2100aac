import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'

const Index = Type.Object({
  service: Type.Literal('wristband'),
  version: Type.String(),
  links: Type.Object({
    docs: Type.String({ description: 'Interactive API documentation' }),
    openapi: Type.String({ description: 'The OpenAPI 3.1 document' }),
    dashboard: Type.String({ description: 'Event dashboard (sign-in page)' }),
    live: Type.String({ description: 'Liveness probe' }),
    health: Type.String({ description: 'Liveness probe (the same answer)' }),
    ready: Type.String({ description: 'Readiness probe' }),
  }),
})

/** Where `GET /` points: the answer's links (its OpenAPI example shows the same). */
export const INDEX_LINKS = {
  docs: '/docs',
  openapi: '/openapi.json',
  dashboard: '/dashboard',
  live: '/live',
  health: '/health',
  ready: '/ready',
}

/** `GET /`: where to go from the bare address, instead of a 404. */
export const indexRoutes: FastifyPluginAsyncTypebox<{ version: string }> = async (app, { version }) => {
  const body = { service: 'wristband' as const, version, links: INDEX_LINKS }
  app.get(
    '/',
    {
      schema: {
        operationId: 'getIndex',
        tags: ['health'],
        summary: 'Index: links to the documentation, the dashboard and the probes',
        response: { 200: { description: 'Where to go from here', ...Index } },
        doc: {
          operationId: 'getIndex',
          returns: 'Where to go from here',
          response: { service: 'wristband', version: '0.3.0', links: INDEX_LINKS },
        },
      },
    },
    async () => body,
  )
}
