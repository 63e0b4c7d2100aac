import cors from '@fastify/cors'
import helmet from '@fastify/helmet'
import type { FastifyInstance } from 'fastify'

/**
 * Security headers on every response (helmet), with a Content-Security-Policy that fits a JSON API:
 * nothing may load and nothing may frame it. Pages served by the service (the API docs, the
 * dashboard) set their own policy per route. CORS is closed unless CORS_ORIGINS lists origins.
 *
 * Every answer is `Cache-Control: no-store` unless its route says otherwise (static assets of the
 * docs): tokens, keys, secrets and personal data travel in many answers, and one mechanism for all
 * of them means a new route that issues a credential cannot forget it.
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
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store')
    done(null, payload)
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
