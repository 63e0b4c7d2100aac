import { isUtf8 } from 'node:buffer'
import { randomUUID } from 'node:crypto'
import { type IncomingMessage, type Server, STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, {
  type FastifyHttpOptions,
  type FastifyInstance,
  type FastifyReply,
  type FastifyServerOptions,
} from 'fastify'
import type { Redis } from 'ioredis'
import { LRUCache } from 'lru-cache'
import type { DestinationStream } from 'pino'
import { dropUnusableForwardedFor } from './client-address.js'
import type { Clock } from './clock.js'
import type { Config } from './config.js'
import { registerErrorHandler, sendError } from './error-handler.js'
import { BadRequestError, NotFoundError } from './errors.js'
import { loggerOptions } from './logging.js'
import {
  countedExactly,
  memoryCounters,
  type RateLimits,
  redisCounters,
  registerRateLimit,
  syncedRedisCounters,
} from './rate-limit.js'
import { ErrorBody, HTTPValidationError, RateLimited } from './schemas.js'
import { createValidatorCompiler, markedNulFree, PutOffSchemas, serializersOnFirstUse } from './validation.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route's schema compilations, put off to their first use; a check compiles them all. */
    putOffSchemas: PutOffSchemas
  }
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/

/** The caller's X-Request-Id when it is a sane one, else a fresh UUID. */
export function requestId(req: IncomingMessage): string {
  const given = req.headers['x-request-id']
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
}

/**
 * The Fastify instance with the service's server options: logging, proxy trust, URL cleaning, body
 * limit, request timeouts, request ids and the answers to errors the router raises.
 */
export function createHttpApp(config: Config, logStream: DestinationStream | undefined) {
  const timeoutMs = config.REQUEST_TIMEOUT_SECONDS * 1000
  const putOff = new PutOffSchemas()
  const options: FastifyHttpOptions<Server> = {
    logger: loggerOptions(config.LOG_LEVEL, logStream, config.tracing),
    // Fastify also takes a hop count here (proxy-addr semantics); its type declaration omits it.
    trustProxy: config.TRUST_PROXY as FastifyServerOptions['trustProxy'],
    // Fastify's one hook that runs before a request is logged, routed or rate limited: the URL stays
    // as it is; an X-Forwarded-For that names no IP address (or is overly long) is dropped here.
    rewriteUrl: (req) => {
      dropUnusableForwardedFor(req)
      return req.url ?? '/'
    },
    bodyLimit: config.BODY_LIMIT_BYTES,
    genReqId: requestId,
    requestIdHeader: false,
    // A request that reaches the instance on a connection it accepted before closing its listener is
    // answered, not turned away with 503 "server is closing" (the drain, docs/operations.md); its
    // answer carries `connection: close` (server.ts), so the connection ends with it.
    return503OnClosing: false,
    // A request whose headers and body have not all arrived REQUEST_TIMEOUT_SECONDS after it began is
    // answered 408 and its connection closed: a client trickling a body, or never finishing it, holds
    // a connection for that long at most. It is the server's timeout, so it covers the verify lane
    // (which sits on the same server) as it covers Fastify's routes. node:http looks for such requests
    // every connectionsCheckingInterval (30 s by default, which would double the timeout).
    requestTimeout: timeoutMs,
    http: {
      requestTimeout: timeoutMs,
      headersTimeout: Math.min(60_000, timeoutMs),
      connectionsCheckingInterval: Math.min(1000, Math.ceil(timeoutMs / 4)),
    },
    clientErrorHandler: answerClientError,
    schemaController: { compilersFactory: { buildSerializer: serializersOnFirstUse(putOff) } },
    // Errors the router raises before any route runs get the documented body too: an undecodable
    // URL is 400; a path segment longer than any id or token the service issues names nothing (404).
    frameworkErrors: (err, _request, reply) =>
      sendError(
        reply as unknown as FastifyReply,
        err.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? new NotFoundError('Not Found')
          : new BadRequestError('Malformed request URL'),
      ),
  }
  const app = Fastify(options).withTypeProvider<TypeBoxTypeProvider>()
  app.decorate('putOffSchemas', putOff)
  if (config.NODE_ENV === 'production' && config.TRUST_PROXY === true)
    app.log.warn(
      'TRUST_PROXY=true: every peer may name the client address in X-Forwarded-For, so a client that reaches ' +
        'the service directly chooses its own address (per-address limits, audit); list the proxies instead',
    )
  return app
}

/**
 * Errors node:http meets before a request reaches Fastify, answered in the documented shape
 * (`{"detail": …}`) on the raw socket, which is then closed: a request not received within
 * REQUEST_TIMEOUT_SECONDS (408), headers too large (431), anything unparsable (400).
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  const [status, detail] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'Request not received in time']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request headers too large']
        : [400, 'Malformed request']
  const body = JSON.stringify({ detail })
  if (socket.writable)
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nCache-Control: no-store\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    )
  socket.destroy()
}

/**
 * What every request goes through besides its route: input validation in the 422 shape, the JSON
 * body parser, the one error handler, the shared error schemas and the X-Request-Id answer header.
 */
export function registerHttp(app: FastifyInstance): void {
  app.setValidatorCompiler(createValidatorCompiler(app.putOffSchemas))
  // Every body is JSON: any other content type is 415, including text/plain, which Fastify parses by
  // default. Bytes that are not UTF-8 are malformed JSON (json_invalid), not silently replaced by U+FFFD.
  app.removeContentTypeParser(['text/plain', 'application/json'])
  const parseJson = app.getDefaultJsonParser('error', 'error')
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer
    // An empty body is no body (as FastAPI reads it): accepted where none is needed, reported as a
    // missing body (422 `missing`) where one is, instead of a JSON decode error.
    if (bytes.length === 0) {
      done(null, undefined)
      return
    }
    if (!isUtf8(bytes)) {
      done(new SyntaxError('request body is not valid UTF-8'), undefined)
      return
    }
    // A leading byte order mark is skipped, as the TextDecoder this replaced did (RFC 8259 allows it).
    const bom = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf
    const text = bytes.toString('utf8', bom ? 3 : 0)
    parseJson(request, text, (err, value) => done(err, err ? value : markedNulFree(value, text)))
  })
  registerErrorHandler(app)
  app.addSchema(ErrorBody)
  app.addSchema(HTTPValidationError)
  app.addSchema(RateLimited)
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    done()
  })
}

export interface RateLimitDeps {
  clock: Clock
  redis: Redis | undefined
  config: Pick<Config, 'REDIS_PREFIX' | 'RATE_LIMIT_SYNC_MS'>
  /** Called once per address and route per minute of excess, however many requests it sends (the audit). */
  onLimited: (ip: string, route: string) => void
}

/**
 * Per-address, per-route limits (platform/rate-limit.ts) on the counters the deployment has: in
 * process, Redis, or Redis synced every RATE_LIMIT_SYNC_MS (limits above 60 a minute only; lower ones
 * count in Redis on every request).
 */
export function registerRateLimits(app: FastifyInstance, deps: RateLimitDeps): RateLimits {
  const { clock, redis, config } = deps
  const recentlyLimited = new LRUCache<string, true>({ max: 10_000, ttl: 60_000 })
  return registerRateLimit(app, {
    // Low limits (60 a minute or less) always count in Redis per request: exact across the fleet.
    countersFor: (route, limit) =>
      !redis
        ? memoryCounters(clock)
        : config.RATE_LIMIT_SYNC_MS === 0 || countedExactly(limit)
          ? redisCounters(redis, `${config.REDIS_PREFIX}rl:${route}|`)
          : syncedRedisCounters(
              redis,
              `${config.REDIS_PREFIX}rl:${route}|`,
              clock,
              config.RATE_LIMIT_SYNC_MS,
            ),
    onExceeded: (ip, route) => {
      const key = `${ip} ${route}`
      if (recentlyLimited.has(key)) return
      recentlyLimited.set(key, true)
      deps.onLimited(ip, route)
    },
  })
}
