import type { IncomingMessage, ServerResponse } from 'node:http'
import cors from '@fastify/cors'
import type { FastifyInstance } from 'fastify'
import helmet from 'helmet'

/**
 * The headers helmet sets for this policy, computed once. Helmet works out the same values on every
 * request (about a seventh of the busy time of POST /tokens/verify in a profile); the policy is the
 * same for every answer, so its headers are worked out by helmet at start and copied onto each reply.
 */
function helmetHeaders(): Record<string, string> {
  const headers: Record<string, string> = {}
  const res = {
    setHeader: (name: string, value: string | number) => {
      headers[name.toLowerCase()] = String(value)
    },
    removeHeader: () => {},
  }
  helmet({
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
  })({} as IncomingMessage, res as unknown as ServerResponse, () => {})
  return headers
}

/** What a JSON answer needs (OWASP's REST security list): the rest of helmet's set concerns documents. */
const API_HEADERS = new Set([
  'content-security-policy',
  'cross-origin-resource-policy',
  'referrer-policy',
  'x-content-type-options',
  'x-frame-options',
])

/** The security headers of JSON answers (`api`) and the ones HTML answers get on top (`document`). */
export function securityHeaders(): { api: Record<string, string>; document: Record<string, string> } {
  const all = Object.entries(helmetHeaders())
  return {
    api: Object.fromEntries(all.filter(([name]) => API_HEADERS.has(name))),
    document: Object.fromEntries(all.filter(([name]) => !API_HEADERS.has(name))),
  }
}

/**
 * The policy of the API documentation pages (swagger-ui's scripts and styles, all from the service
 * itself, with the hashes of its inline parts). `upgrade-insecure-requests` makes a browser fetch those
 * scripts over HTTPS: over plain HTTP under any name but localhost the page would stay blank, so the
 * directive is added only when the page itself came over HTTPS (directly, or by X-Forwarded-Proto
 * from a trusted proxy). Set on request, after the API policy of `registerSecurityHeaders`.
 */
export function registerDocsPolicy(app: FastifyInstance, prefix: string): void {
  app.addHook('onRequest', (request, reply, done) => {
    if (request.url === prefix || request.url.startsWith(`${prefix}/`)) {
      const { script, style } = app.swaggerCSP
      const policy = [
        "default-src 'self'",
        "base-uri 'self'",
        "font-src 'self' https: data:",
        "frame-ancestors 'self'",
        "img-src 'self' data: validator.swagger.io",
        "object-src 'none'",
        `script-src 'self' ${script.join(' ')}`,
        "script-src-attr 'none'",
        `style-src 'self' https: ${style.join(' ')}`,
        ...(request.protocol === 'https' ? ['upgrade-insecure-requests'] : []),
      ]
      reply.header('content-security-policy', policy.join('; '))
    }
    done()
  })
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** false: CORS leaves the route alone (no CORS headers, no preflight answered for it). */
    cors?: false
  }
}

/**
 * Security headers on every response (helmet), with a Content-Security-Policy that fits a JSON API:
 * nothing may load and nothing may frame it. Pages served by the service (the API docs, the
 * dashboard) set their own policy per route. HTML answers get helmet's whole set; JSON answers the
 * part that means something to an API client (each header costs time on every verify call, and
 * `X-DNS-Prefetch-Control` or `X-Download-Options` say nothing to a JSON reader). CORS is closed unless
 * CORS_ORIGINS lists origins.
 *
 * Every answer is `Cache-Control: no-store` unless its route says otherwise (static assets of the
 * docs): tokens, keys, secrets and personal data travel in many answers, and one mechanism for all
 * of them means a new route that issues a credential cannot forget it.
 */
export async function registerSecurityHeaders(app: FastifyInstance, corsOrigins: string[]): Promise<void> {
  const { api, document } = securityHeaders()
  app.addHook('onRequest', (_request, reply, done) => {
    reply.headers(api)
    done()
  })
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store')
    const type = reply.getHeader('content-type')
    if (typeof type === 'string' && type.startsWith('text/html')) reply.headers(document)
    done(null, payload)
  })
  if (corsOrigins.length > 0) {
    await app.register(cors, {
      origin: corsOrigins,
      methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
      allowedHeaders: ['authorization', 'content-type', 'api_key', 'idempotency-key', 'x-request-id'],
      // Browser scanners correct their clock from the service's Date header (packages/scanner).
      exposedHeaders: ['date'],
      maxAge: 600,
    })
  }
}
