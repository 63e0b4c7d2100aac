import type { IncomingMessage } from 'node:http'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { applyCount, type RouteLimiter } from '../platform/rate-limit.js'

/**
 * What a verify credential (an API key with scope `tokens:verify`) is counted under: its id, or null
 * when the key is no live verify credential. A promise when this instance has not seen the key lately.
 */
export type CredentialLookup = (apiKey: string) => string | null | Promise<string | null>

/** One request counted: under which limit, the count so far in the window, the window's time left. */
export interface CallerCount {
  limiter: RouteLimiter
  /** -1 when the counters failed (Redis unreachable): the request goes through without headers. */
  count: number
  resetInMs: number
}

export interface VerifyCallers {
  /** Counts one request of `ip`, presenting `apiKey` or none, under the budget it belongs to. */
  count(ip: string, apiKey: string | undefined): CallerCount | Promise<CallerCount>
}

/**
 * The budgets of POST /tokens/verify's callers (decisions of 2026-11-25): a backend that presents a
 * verify credential is counted per credential (VERIFY_CLIENT_RATE_LIMIT a minute), so junk tokens sent
 * through it spend its own budget and nobody else's; everyone else per address (600 a minute). A key
 * that is no live verify credential counts as anonymous. A key this instance has not seen lately is
 * looked up in the database once; that request is paid from the address's budget first, so a flood of
 * made-up keys costs at most the anonymous rate in look-ups.
 *
 * The route (its preValidation hook) and the verify lane both count through this one object.
 */
export function verifyCallers(deps: {
  anonymous: RouteLimiter
  credentials: RouteLimiter
  lookup: CredentialLookup
}): VerifyCallers {
  const { anonymous, credentials, lookup } = deps
  const hit = (limiter: RouteLimiter, key: string): CallerCount | Promise<CallerCount> => {
    const n = limiter.store.hit(key, limiter.windowMs)
    if (typeof n === 'number') return { limiter, count: n, resetInMs: limiter.store.resetInMs }
    return n.then(([count, resetInMs]) => ({ limiter, count, resetInMs }))
  }
  const afterLookup = async (ip: string, id: Promise<string | null>): Promise<CallerCount> => {
    const byAddress = await hit(anonymous, ip)
    if (byAddress.count > anonymous.max) return byAddress
    const found = await id.catch(() => null)
    return found === null ? byAddress : hit(credentials, found)
  }
  return {
    count(ip, apiKey) {
      if (apiKey === undefined) return hit(anonymous, ip)
      const id = lookup(apiKey)
      if (typeof id === 'string') return hit(credentials, id)
      if (id === null) return hit(anonymous, ip)
      return afterLookup(ip, id)
    },
  }
}

/** A request the verify lane counted and handed to Fastify: the route applies this count. */
const COUNTED = Symbol('wristband.verifyCallerCount')
type CountedRequest = IncomingMessage & { [COUNTED]?: CallerCount }

export function markCounted(req: IncomingMessage, count: CallerCount): void {
  ;(req as CountedRequest)[COUNTED] = count
}

/** The `api_key` of a verify body, when it is one the route's schema takes. */
export function apiKeyOf(body: unknown, maxLength: number): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined
  const key = (body as { api_key?: unknown }).api_key
  return typeof key === 'string' && key.length > 0 && key.length <= maxLength ? key : undefined
}

/**
 * The route's limit, a preValidation hook: the body is parsed (the credential is in it) and not yet
 * validated, so a request the schema refuses is counted too. Sets the `x-ratelimit-*` headers of the
 * budget the request was counted under; over it, 429.
 */
export function limitVerifyCallers(callers: VerifyCallers, maxApiKey: number) {
  return (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const ip = request.ip
    const finish = (c: CallerCount) =>
      done(c.count < 0 ? undefined : applyCount(reply, c.limiter, ip, c.count, c.resetInMs))
    const counted =
      (request.raw as CountedRequest)[COUNTED] ?? callers.count(ip, apiKeyOf(request.body, maxApiKey))
    if (counted instanceof Promise) void counted.then(finish)
    else finish(counted)
  }
}
