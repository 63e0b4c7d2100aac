import { isUtf8 } from 'node:buffer'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { isIP, type Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import { Readable } from 'node:stream'
import proxyAddr from '@fastify/proxy-addr'
import type { FastifyInstance } from 'fastify'
import type { Metrics } from '../metrics/metrics.js'
import { dropUnusableForwardedFor, MAX_FORWARDED_FOR_LENGTH } from '../platform/client-address.js'
import type { TrustProxy } from '../platform/config.js'
import { COUNTED, type CountedRequest, type RouteLimiter, resetSeconds } from '../platform/rate-limit.js'
import type { Claims } from './claims.js'
import type { TokenService } from './token.service.js'
import type { VerifyAnswers } from './verify-answer.js'

/** The route the lane answers; every other request goes to Fastify untouched. */
const METHOD = 'POST'
const URL = '/tokens/verify'
/** The JSON types Fastify's parser takes as they are; any other spelling goes to Fastify. */
const JSON_TYPES = new Set(['application/json', 'application/json; charset=utf-8'])
/** The body of `{"token": …}` with a token of the route's longest (8192), with room for spacing. */
const MAX_BODY = 8192 * 6 + 64
const MAX_TOKEN = 8192
const JSON_TYPE = 'application/json; charset=utf-8'
/** `{"token":"`, the start of a compact body. */
const COMPACT_HEAD = Buffer.from('{"token":"')
const COMPACT_START = COMPACT_HEAD.length
/** Characters that stand for themselves inside a JSON string: base64url, JWT dots, API-key prefixes. */
const TOKEN_CHARACTERS = /^[A-Za-z0-9._~+/=-]*$/

/** A request's body the lane read and did not answer: Fastify reads it from here (a preParsing hook). */
const REPLAY = Symbol('wristband.verifyLaneBody')
type LaneRequest = CountedRequest & { [REPLAY]?: Buffer }

export interface VerifyLaneDeps {
  tokens: TokenService
  answers: VerifyAnswers
  /** The route's limiter: the lane counts through the same counters as the route's hook. */
  limiter: RouteLimiter
  metrics: Pick<Metrics, 'observeRequest'>
  /** The security headers of JSON answers (see registerSecurityHeaders). */
  securityHeaders: Record<string, string>
  trustProxy: TrustProxy
  bodyLimit: number
  /** With CORS configured, a request with an Origin header is Fastify's (the CORS plugin answers it). */
  cors: boolean
  requestId: (req: IncomingMessage) => string
  /** True once the app is closing: Fastify then answers (503, `connection: close`). */
  closing: () => boolean
}

/** The client address as Fastify's `request.ip` works it out for the same TRUST_PROXY. */
function addressOf(trustProxy: TrustProxy): (req: IncomingMessage) => string {
  if (trustProxy === false) return (req) => req.socket.remoteAddress ?? ''
  // Fastify's own reading (lib/request.js): a hop count trusts no proxy (it cannot check the peer).
  const trust =
    trustProxy === true
      ? () => true
      : typeof trustProxy === 'number'
        ? () => false
        : proxyAddr.compile(trustProxy)
  // Whether a connection's peer is a trusted proxy, asked once per connection: parsing the peer's
  // address on every request (ipaddr.js under proxy-addr) cost 4 % of a verify.
  const peerTrusted = new WeakMap<Socket, boolean>()
  return (req) => {
    const forwarded = req.headers['x-forwarded-for']
    const peer = req.socket.remoteAddress
    // One address from one proxy, the usual case: proxy-addr would answer it, or the peer when the
    // peer is not trusted (a plain address is all `isIP` takes, so no cleaning or splitting is due).
    if (
      typeof forwarded === 'string' &&
      peer !== undefined &&
      forwarded.length <= MAX_FORWARDED_FOR_LENGTH &&
      !forwarded.includes(',') &&
      isIP(forwarded) !== 0
    ) {
      let trusted = peerTrusted.get(req.socket)
      if (trusted === undefined) {
        trusted = trust(peer, 0)
        peerTrusted.set(req.socket, trusted)
      }
      return trusted ? forwarded : peer
    }
    // The same cleaning as Fastify's rewriteUrl step (app.ts): a forged or overlong header is ignored.
    dropUnusableForwardedFor(req)
    const all = proxyAddr.all(req, trust)
    return all[all.length - 1] ?? ''
  }
}

/**
 * A `node:http` request listener in front of Fastify that answers canonical POST /tokens/verify
 * requests (a JSON content type, a body of exactly `{"token": string}`) outside Fastify's request
 * cycle: the route is the hottest of the service, and Fastify's per-request work (routing, hooks,
 * reply, child logger) cost about as much as everything verify itself does.
 *
 * It applies what the route applies: the same rate-limit counters, the same TokenService check and
 * answer text, the same security headers, request id and metrics, and the route's log policy (no
 * request lines at LOG_LEVEL info and above; at debug and trace the lane is off). Anything else goes
 * to Fastify untouched, so every error keeps its one shape and its one handler: another route or
 * method, another content type, CORS, a missing or large Content-Length, a body that is not exactly
 * `{"token": string}` (the body read so far is handed over through a preParsing hook), a request over
 * the limit (handed over with its count, so it is counted once and refused by the route's hook), and
 * a check that failed (a database outage while resolving an API key). The route stays, with its
 * schema, in the OpenAPI document; VERIFY_FAST_LANE=false sends everything through it.
 *
 * Returns the listener, which answers true when it took the request.
 */
export function verifyLane(deps: VerifyLaneDeps) {
  const { tokens, answers, limiter, metrics, requestId, closing } = deps
  const { max, windowMs, store } = limiter
  const addressOfRequest = addressOf(deps.trustProxy)
  const bodyLimit = Math.min(deps.bodyLimit, MAX_BODY)
  const fixedHeaders: string[] = ['content-type', JSON_TYPE, 'cache-control', 'no-store']
  for (const [name, value] of Object.entries(deps.securityHeaders)) fixedHeaders.push(name, value)
  const maxText = String(max)

  function respond(
    res: ServerResponse,
    req: IncomingMessage,
    text: string,
    count: number,
    resetInMs: number,
    started: number,
  ) {
    const headers = [
      ...fixedHeaders,
      'content-length',
      String(Buffer.byteLength(text)),
      'x-request-id',
      requestId(req),
    ]
    if (count >= 0)
      headers.push(
        'x-ratelimit-limit',
        maxText,
        'x-ratelimit-remaining',
        String(count < max ? max - count : 0),
        'x-ratelimit-reset',
        String(resetSeconds(resetInMs)),
      )
    res.writeHead(200, headers)
    // Head and body in one write.
    res.end(text)
    metrics.observeRequest(METHOD, URL, 200, (performance.now() - started) / 1000)
  }

  return (
    req: LaneRequest,
    res: ServerResponse,
    fastify: (req: IncomingMessage, res: ServerResponse) => void,
  ): boolean => {
    if (req.method !== METHOD || req.url !== URL) return false
    const h = req.headers
    const type = h['content-type']
    const length = h['content-length']
    if (
      type === undefined ||
      !JSON_TYPES.has(type) ||
      length === undefined ||
      h['transfer-encoding'] !== undefined
    )
      return false
    if ((deps.cors && h.origin !== undefined) || closing()) return false
    const bytes = Number(length)
    if (!(bytes > 0 && bytes <= bodyLimit)) return false

    const started = performance.now()
    const handOver = (body: Buffer, counted?: [number, number]) => {
      req[REPLAY] = body
      if (counted) req[COUNTED] = Promise.resolve(counted)
      fastify(req, res)
    }
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
      const token = canonicalToken(body)
      if (token === null) return handOver(body)
      const ip = addressOfRequest(req)
      const count = store.hit(ip, windowMs)
      if (typeof count !== 'number')
        return void count.then(([n, resetInMs]) => answer(body, token, n, resetInMs))
      answer(body, token, count, store.resetInMs)
    })
    // An aborted upload ends here, answered by nobody, as with Fastify: node:http emits 'error' on a
    // request only when it has a listener, so none is added.

    function answer(body: Buffer, token: string, count: number, resetInMs: number) {
      if (count > max) return handOver(body, [count, resetInMs])
      let claims: Claims | null | Promise<Claims | null>
      try {
        claims = tokens.introspect(token)
      } catch {
        return handOver(body, [count, resetInMs])
      }
      if (claims instanceof Promise)
        return void claims.then(
          (c) => respond(res, req, answers(c), count, resetInMs, started),
          () => handOver(body, [count, resetInMs]),
        )
      respond(res, req, answers(claims), count, resetInMs, started)
    }
    return true
  }
}

/**
 * The token of a body that is exactly `{"token": string}` (UTF-8, a token of at most 8192 UTF-16
 * units, which is within the route's limit of 8192 characters), else null: Fastify then parses and
 * validates it, and answers whatever is wrong in its one shape.
 */
function canonicalToken(body: Buffer): string | null {
  // The compact form every client library sends, with a token of JWT / API-key characters: the token
  // is the bytes between the quotes as they are, without a UTF-8 check and a JSON parse.
  const end = body.length - 2
  if (
    end >= COMPACT_START &&
    end - COMPACT_START <= MAX_TOKEN &&
    body[end] === 0x22 &&
    body[end + 1] === 0x7d &&
    body.compare(COMPACT_HEAD, 0, COMPACT_START, 0, COMPACT_START) === 0
  ) {
    const token = body.toString('latin1', COMPACT_START, end)
    if (TOKEN_CHARACTERS.test(token)) return token
  }
  if (body[0] !== 0x7b || !isUtf8(body)) return null
  let parsed: unknown
  try {
    parsed = JSON.parse(body.toString('utf8'))
  } catch {
    return null
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null
  let keys = 0
  for (const k in parsed) if (k !== 'token' || ++keys > 1) return null
  const token = (parsed as { token?: unknown }).token
  return typeof token === 'string' && token.length <= MAX_TOKEN && keys === 1 ? token : null
}

/** Feeds Fastify the body the lane read before handing a request over. */
export function replayLaneBodies(app: FastifyInstance): void {
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const body = (request.raw as LaneRequest)[REPLAY]
    if (body === undefined) return done(null, payload)
    done(null, Readable.from([body], { objectMode: false }))
  })
}
