import { isUtf8 } from 'node:buffer'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { isIP, type Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import { Readable } from 'node:stream'
import proxyAddr from '@fastify/proxy-addr'
import type { FastifyInstance } from 'fastify'
import type { Metrics } from '../metrics/metrics.js'
import { dropUnusableForwardedFor, MAX_FORWARDED_FOR_LENGTH } from '../platform/client-address.js'
import type { Config, TrustProxy } from '../platform/config.js'
import { requestId } from '../platform/http.js'
import { rateLimitHeaders } from '../platform/rate-limit.js'
import { type CheckLaneDeps, checkLane } from './check-lane.js'
import type { Claims } from './claims.js'
import type { TokenService } from './token.service.js'
import {
  laneAllowedAt,
  VERIFY_LIMITS,
  VERIFY_METHOD,
  VERIFY_URL,
  type VerifyLimits,
  verifyAnswerHeaders,
} from './verify.routes.js'
import type { VerifyAnswers } from './verify-answer.js'
import { type CallerCount, markCounted, type VerifyCallers } from './verify-callers.js'

/** The JSON types Fastify's parser takes as they are; any other spelling goes to Fastify. */
const JSON_TYPES = new Set(['application/json', 'application/json; charset=utf-8'])
/** `{"token":"`, the start of a compact body, and `","api_key":"` between its two strings. */
const COMPACT_HEAD = Buffer.from('{"token":"')
const COMPACT_START = COMPACT_HEAD.length
const COMPACT_KEY = Buffer.from('","api_key":"')
/** Characters that stand for themselves inside a JSON string: base64url, JWT dots, API-key prefixes. */
const TOKEN_CHARACTERS = /^[A-Za-z0-9._~+/=-]*$/

/** A request's body the lane read and did not answer: Fastify reads it from here (a preParsing hook). */
const REPLAY = Symbol('wristband.verifyLaneBody')
type LaneRequest = IncomingMessage & { [REPLAY]?: Buffer }

/** What the lane needs of the assembled app. */
export interface VerifyLaneDeps {
  tokens: TokenService
  answers: VerifyAnswers
  /** The route's budgets: the lane counts through the same counters as the route's hook. */
  callers: VerifyCallers
  metrics: Pick<Metrics, 'observeRequest'>
  /** True while Fastify must answer every request (the instance is draining its connections). */
  toFastify?: () => boolean
  /** GET /tokens/check's part of the lane (check-lane.ts). */
  check: Omit<CheckLaneDeps, 'metrics'>
}

type Listener = (req: IncomingMessage, res: ServerResponse) => void

export interface VerifyLane {
  /**
   * Puts the lane in front of Fastify on the app's own server (the one Fastify made, with its
   * settings and timeouts): the server's request listener becomes the lane, which hands Fastify
   * every request it does not answer. Call once the routes are registered, before listening.
   */
  attach(app: FastifyInstance, deps: VerifyLaneDeps): void
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
 * The verify lane: a `node:http` request listener in front of Fastify that answers canonical
 * POST /tokens/verify requests (a JSON content type, a body of exactly `{"token": string}` or
 * `{"token": string, "api_key": string}`) outside Fastify's request cycle: the route is the hottest of
 * the service, and Fastify's per-request work (routing, hooks, reply, child logger) cost about as much
 * as everything verify itself does.
 *
 * It applies what the route applies, taken from where the route takes it (verify.routes.ts): the path
 * and method, the token and key limits, the answer's headers, the log policy (no request lines at
 * LOG_LEVEL info and above; at debug and trace the lane is off); the callers' budgets and the answer
 * text are the route's own objects; the client address is Fastify's reading of the same TRUST_PROXY.
 * Anything else goes to Fastify untouched, so every error keeps its one shape and its one handler:
 * another route or method, another content type, CORS, a missing or large Content-Length, a body
 * that is not exactly one of the two forms (the body read so far is handed over through a preParsing
 * hook), a request over its budget (handed over with its count, so it is counted once and refused by
 * the route's hook), and a check that failed (a database outage while resolving an API key). The
 * route stays, with its schema, in the OpenAPI document; VERIFY_FAST_LANE=false sends everything
 * through it.
 *
 * GET /tokens/check, the gateways' form of the same question, is on the lane too (check-lane.ts), with
 * the same budgets and the same token decision; it answers its refusals (401, 403) as well, since a
 * gateway asks about every request, signed in or not.
 *
 * Undefined when the lane is off (VERIFY_FAST_LANE=false, or LOG_LEVEL debug or trace).
 */
export function createVerifyLane(
  config: Pick<
    Config,
    'VERIFY_FAST_LANE' | 'LOG_LEVEL' | 'TRUST_PROXY' | 'BODY_LIMIT_BYTES' | 'CORS_ORIGINS'
  >,
  limits: VerifyLimits = VERIFY_LIMITS,
): VerifyLane | undefined {
  if (!config.VERIFY_FAST_LANE || !laneAllowedAt(config.LOG_LEVEL)) return undefined
  return {
    attach(app, deps) {
      const server = app.server
      const listeners = server.listeners('request') as Listener[]
      if (listeners.length !== 1) throw new Error("the verify lane expects Fastify's one request listener")
      const fastify = listeners[0]!
      let closing = false
      app.addHook('preClose', async () => {
        closing = true
      })
      replayLaneBodies(app)
      const toFastify = deps.toFastify ?? (() => false)
      const handOver = () => closing || toFastify()
      const address = addressOf(config.TRUST_PROXY)
      const lane = laneListener(config, limits, deps, address, handOver)
      const check = checkLane({ ...deps.check, metrics: deps.metrics }, limits, address, handOver)
      server.removeListener('request', fastify)
      server.on('request', (req: IncomingMessage, res: ServerResponse) => {
        if (!lane(req, res, fastify) && !check(req, res, fastify)) fastify(req, res)
      })
    },
  }
}

/** The lane itself: answers true when it took the request. */
function laneListener(
  config: Pick<Config, 'BODY_LIMIT_BYTES' | 'CORS_ORIGINS'>,
  limits: VerifyLimits,
  deps: VerifyLaneDeps,
  addressOfRequest: (req: IncomingMessage) => string,
  closing: () => boolean,
) {
  const { tokens, answers, callers, metrics } = deps
  const cors = config.CORS_ORIGINS.length > 0
  // The largest canonical body: both strings at six bytes a character (\uXXXX), with room for spacing.
  const bodyLimit = Math.min(config.BODY_LIMIT_BYTES, (limits.maxToken + limits.maxApiKey) * 6 + 64)
  const parse = canonicalBody(limits)
  const fixedHeaders = verifyAnswerHeaders()

  function respond(res: ServerResponse, req: IncomingMessage, text: string, c: CallerCount, started: number) {
    const headers = [
      ...fixedHeaders,
      'content-length',
      String(Buffer.byteLength(text)),
      'x-request-id',
      requestId(req),
    ]
    if (c.count >= 0) headers.push(...rateLimitHeaders(c.limiter.max, c.count, c.resetInMs))
    res.writeHead(200, headers)
    // Head and body in one write.
    res.end(text)
    metrics.observeRequest(VERIFY_METHOD, VERIFY_URL, 200, (performance.now() - started) / 1000)
  }

  return (req: LaneRequest, res: ServerResponse, fastify: Listener): boolean => {
    if (req.method !== VERIFY_METHOD || req.url !== VERIFY_URL) return false
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
    if ((cors && h.origin !== undefined) || closing()) return false
    const bytes = Number(length)
    if (!(bytes > 0 && bytes <= bodyLimit)) return false

    const started = performance.now()
    const handOver = (body: Buffer, counted?: CallerCount) => {
      req[REPLAY] = body
      if (counted) markCounted(req, counted)
      fastify(req, res)
    }
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
      const parsed = parse(body)
      if (parsed === null) return handOver(body)
      const counted = callers.count(addressOfRequest(req), parsed.apiKey)
      if (counted instanceof Promise)
        return void counted.then(
          (c) => answer(body, parsed.token, c),
          // The key could not be checked (the database unreachable): the route counts it again and
          // answers what is wrong in its one shape.
          () => handOver(body),
        )
      answer(body, parsed.token, counted)
    })
    // An aborted upload ends here, answered by nobody, as with Fastify: node:http emits 'error' on a
    // request only when it has a listener, so none is added. A trickled one is cut by the server's
    // request timeout (REQUEST_TIMEOUT_SECONDS), which covers the lane as it covers Fastify.

    function answer(body: Buffer, token: string, c: CallerCount) {
      if (c.count > c.limiter.max) return handOver(body, c)
      let claims: Claims | null | Promise<Claims | null>
      try {
        claims = tokens.introspect(token)
      } catch {
        return handOver(body, c)
      }
      if (claims instanceof Promise)
        return void claims.then(
          (v) => respond(res, req, answers(v), c, started),
          () => handOver(body, c),
        )
      respond(res, req, answers(claims), c, started)
    }
    return true
  }
}

interface CanonicalBody {
  token: string
  apiKey: string | undefined
}

/**
 * The token (and api_key) of a body that is exactly `{"token": string}` or `{"token": string,
 * "api_key": string}` within the route's limits (UTF-8; lengths in UTF-16 units, which never exceed a
 * string's length in characters, so the lane takes only what the route's schema takes), else null:
 * Fastify then parses and validates it, and answers whatever is wrong in its one shape.
 */
function canonicalBody(limits: VerifyLimits): (body: Buffer) => CanonicalBody | null {
  const fits = (token: unknown, apiKey: unknown) =>
    typeof token === 'string' &&
    token.length <= limits.maxToken &&
    (apiKey === undefined ||
      (typeof apiKey === 'string' && apiKey.length > 0 && apiKey.length <= limits.maxApiKey))
  return (body) => {
    // The compact form every client library sends, with strings of JWT / API-key characters: they are
    // the bytes between the quotes as they are, without a UTF-8 check and a JSON parse.
    const end = body.length - 2
    if (
      end >= COMPACT_START &&
      body[end] === 0x22 &&
      body[end + 1] === 0x7d &&
      body.compare(COMPACT_HEAD, 0, COMPACT_START, 0, COMPACT_START) === 0
    ) {
      const quote = body.indexOf(0x22, COMPACT_START)
      const keyAt = quote + COMPACT_KEY.length
      let token: string | undefined
      let apiKey: string | undefined
      if (quote === end) token = body.toString('latin1', COMPACT_START, end)
      else if (keyAt <= end && body.compare(COMPACT_KEY, 0, COMPACT_KEY.length, quote, keyAt) === 0) {
        token = body.toString('latin1', COMPACT_START, quote)
        apiKey = body.toString('latin1', keyAt, end)
      }
      if (
        token !== undefined &&
        TOKEN_CHARACTERS.test(token) &&
        (apiKey === undefined || TOKEN_CHARACTERS.test(apiKey)) &&
        fits(token, apiKey)
      )
        return { token, apiKey }
    }
    if (body[0] !== 0x7b || !isUtf8(body)) return null
    let parsed: unknown
    try {
      parsed = JSON.parse(body.toString('utf8'))
    } catch {
      return null
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null
    for (const k in parsed) if (k !== 'token' && k !== 'api_key') return null
    const { token, api_key: apiKey } = parsed as { token?: unknown; api_key?: unknown }
    return fits(token, apiKey) ? { token: token as string, apiKey: apiKey as string | undefined } : null
  }
}

/** Feeds Fastify the body the lane read before handing a request over. */
function replayLaneBodies(app: FastifyInstance): void {
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const body = (request.raw as LaneRequest)[REPLAY]
    if (body === undefined) return done(null, payload)
    done(null, Readable.from([body], { objectMode: false }))
  })
}
