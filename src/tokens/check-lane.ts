import type { IncomingMessage, ServerResponse } from 'node:http'
import { performance } from 'node:perf_hooks'
import type { Metrics } from '../metrics/metrics.js'
import { requestId } from '../platform/http.js'
import { rateLimitHeaders } from '../platform/rate-limit.js'
import { securityHeaders } from '../platform/security-headers.js'
import { isCanonicalInteger } from '../platform/validation.js'
import {
  authenticate,
  type CheckAnswers,
  judge,
  REQUIRE_HEADER,
  REQUIREMENT_FORMS,
  type Refusal,
  type RequirementValues,
  requirementsOf,
} from './check.js'
import { CHECK_METHODS, CHECK_SUFFIX_URL, CHECK_URL } from './check.routes.js'
import type { Claims } from './claims.js'
import type { TokenService } from './token.service.js'
import type { VerifyLimits } from './verify.routes.js'
import { type CallerCount, markCounted, type VerifyCallers } from './verify-callers.js'

/** What the check's part of the lane needs of the assembled app. */
export interface CheckLaneDeps {
  tokens: Pick<TokenService, 'introspect'>
  checks: CheckAnswers
  /** The route's budgets (POST /tokens/verify's): counted through the same counters as the route's hook. */
  callers: VerifyCallers
  metrics: Pick<Metrics, 'observeRequest'>
}

type Listener = (req: IncomingMessage, res: ServerResponse) => void

const METHODS = new Set<string>(CHECK_METHODS)
const PATTERNS = {
  role: new RegExp(REQUIREMENT_FORMS.role.pattern),
  type: new RegExp(REQUIREMENT_FORMS.type.pattern),
  scope: new RegExp(REQUIREMENT_FORMS.scope.pattern),
}

/**
 * One requirement's value as the route's schema takes it (its pattern and length, an event id in
 * canonical decimal from 1): the value to use, or undefined when the lane must leave the request to
 * Fastify (which answers 422 in its one shape).
 */
function requirementValue(name: string, value: string): string | number | undefined {
  if (name === 'event') return isCanonicalInteger(value) && value !== '0' ? Number(value) : undefined
  if (name !== 'role' && name !== 'type' && name !== 'scope') return undefined
  return value.length <= REQUIREMENT_FORMS[name].maxLength && PATTERNS[name].test(value) ? value : undefined
}

/**
 * The requirements of a check URL's query (`role=admin&event=1`): null for anything the lane does not
 * read exactly as Fastify would (an unknown or repeated parameter, an escape, a value out of form),
 * which then goes to Fastify. Requirement values need no escapes: their characters stand for themselves.
 */
function queryRequirements(query: string): RequirementValues | null {
  const out: Record<string, string | number> = {}
  if (query === '') return out
  for (const part of query.split('&')) {
    const eq = part.indexOf('=')
    const name = part.slice(0, eq)
    if (eq < 0 || name in out) return null
    const value = requirementValue(name, part.slice(eq + 1))
    if (value === undefined) return null
    out[name] = value
  }
  return out
}

/** The requirements of the `Wristband-Require-*` headers, or null as above (an unknown one included). */
function headerRequirements(headers: IncomingMessage['headers']): RequirementValues | null {
  const out: Record<string, string | number> = {}
  for (const name in headers) {
    if (!name.startsWith(REQUIRE_HEADER)) continue
    const given = headers[name]
    const value =
      typeof given === 'string' ? requirementValue(name.slice(REQUIRE_HEADER.length), given) : undefined
    if (value === undefined) return null
    out[name.slice(REQUIRE_HEADER.length)] = value
  }
  return out
}

/**
 * The check's part of the verify lane (verify-lane.ts): answers GET /tokens/check (any of its methods,
 * at the path or under it) before Fastify, as the route (check.routes.ts) would, through the same
 * decision and answers (check.ts) and the same callers' budgets. The body is never read. Requests the
 * lane cannot answer exactly as the route does go to Fastify untouched: requirements not in the
 * route's form, a request over its budget (handed over with its count, so it is counted once), a
 * token service that could not decide (the route tries again and answers 503 if it cannot either),
 * and every request while the instance drains.
 *
 * Answers true when it took the request.
 */
export function checkLane(
  deps: CheckLaneDeps,
  limits: VerifyLimits,
  addressOf: (req: IncomingMessage) => string,
  closing: () => boolean,
) {
  const { tokens, checks, callers, metrics } = deps
  const security = Object.entries(securityHeaders().api).flat()
  const json = ['content-type', 'application/json; charset=utf-8', 'cache-control', 'no-store']

  return (req: IncomingMessage, res: ServerResponse, fastify: Listener): boolean => {
    const url = req.url!
    if (!url.startsWith(CHECK_URL)) return false
    const next = url.charCodeAt(CHECK_URL.length)
    // The exact path (with or without a query), or a path under it (whose query is the original
    // request's, not the gateway's: requirements come from headers only there).
    const suffix = next === 0x2f
    if (!(suffix || next === 0x3f || Number.isNaN(next))) return false
    if (!METHODS.has(req.method!) || closing()) return false
    const h = req.headers
    const fromHeaders = headerRequirements(h)
    const fromQuery = suffix || next !== 0x3f ? {} : queryRequirements(url.slice(CHECK_URL.length + 1))
    if (fromHeaders === null || fromQuery === null) return false
    const required = requirementsOf(fromQuery, fromHeaders)
    const route = suffix ? CHECK_SUFFIX_URL : CHECK_URL
    const given = h.api_key
    const apiKey =
      typeof given === 'string' && given.length > 0 && given.length <= limits.maxApiKey ? given : undefined
    const started = performance.now()

    const handOver = (c?: CallerCount) => {
      if (c) markCounted(req, c)
      fastify(req, res)
    }
    const write = (status: number, c: CallerCount, answer: string[], body: string) => {
      const headers = [...security, 'x-request-id', requestId(req), ...answer]
      if (c.count >= 0) headers.push(...rateLimitHeaders(c.limiter.max, c.count, c.resetInMs))
      headers.push('content-length', String(Buffer.byteLength(body)))
      res.writeHead(status, headers)
      // Head and body in one write (node:http sends no body to a HEAD).
      res.end(body)
      metrics.observeRequest(req.method!, route, status, (performance.now() - started) / 1000)
    }
    const finish = (outcome: Claims | Refusal, c: CallerCount) => {
      const refusal = typeof outcome === 'string' ? outcome : judge(outcome, required)
      if (refusal === null) return write(200, c, checks.allowed(outcome as Claims), '')
      const r = checks.refusal(refusal)
      write(r.status, c, [...json, ...r.headers], r.body)
    }
    const decide = (c: CallerCount) => {
      if (c.count > c.limiter.max) return handOver(c)
      let outcome: ReturnType<typeof authenticate>
      try {
        outcome = authenticate(tokens, h.authorization, limits.maxToken)
      } catch {
        return handOver(c)
      }
      if (outcome instanceof Promise)
        return void outcome.then(
          (o) => finish(o, c),
          () => handOver(c),
        )
      finish(outcome, c)
    }

    const counted = callers.count(addressOf(req), apiKey)
    if (counted instanceof Promise) counted.then(decide, () => handOver())
    else decide(counted)
    return true
  }
}
