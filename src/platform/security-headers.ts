import cors from '@fastify/cors'
import helmet from '@fastify/helmet'
import type { FastifyInstance } from 'fastify'

/**
 * Security headers on every response (helmet), with a Content-Security-Policy that fits a JSON API:
 * nothing may load and nothing may frame it. Pages served by the service (the API docs, the
 * dashboard) set their own policy per route. CORS is closed unless CORS_ORIGINS lists origins.
 */
export async function registerSecurityHeaders(app: FastifyInstance, corsOrigins: string[]): Promise<void> {
  await app.register(helmet, {
    global: true,
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'none'"],
        frameAncestors: ["'none'"],
        baseUri: ["'none'"],
        formAction: ["'none'"],
      },
    },
    // HSTS only means something over HTTPS, which a proxy in front terminates; it adds it there.
    strictTransportSecurity: false,
    crossOriginResourcePolicy: { policy: 'same-origin' },
  })
  if (corsOrigins.length > 0) {
    await app.register(cors, {
      origin: corsOrigins,
      methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
      allowedHeaders: ['authorization', 'content-type', 'api_key', 'idempotency-key', 'x-request-id'],
      maxAge: 600,
    })
  }
}
