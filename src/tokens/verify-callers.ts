import type { IncomingMessage } from 'node:http'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { addressKey } from '../platform/client-address.js'
import { applyCount, type RouteLimiter } from '../platform/rate-limit.js'

/**
 * What a verify credential (an API key with scope `tokens:verify`) is counted under: its id, or null
 * when the key is no live verify credential.
 */
export interface CredentialLookup {
  /**
   * What this instance knows without asking the database (its cache, the revocation list): the id,
   * null, or undefined when only the database can tell (a key not seen lately).
   */
  known(apiKey: string): string | null | undefined | Promise<string | null>
  /** Asks the database; rejects when it cannot (unreachable): the key can then not be checked. */
  fetch(apiKey: string): Promise<string | null>
}

/** One request counted: under which limit, the count so far in the window, the window's time left. */
export interface CallerCount {
  limiter: RouteLimiter
  /** -1 when the counters failed (Redis unreachable): the request goes through without headers. */
  count: number
  resetInMs: number
}

export interface VerifyCallers {
  /**
   * Counts one request of `ip`, presenting `apiKey` or none, under the budget it belongs to. Rejects
   * when a key must be looked up and the database cannot be asked.
   */
  count(ip: string, apiKey: string | undefined): CallerCount | Promise<CallerCount>
  /** Whether a request was counted under a live verify credential (its own budget) or as anonymous. */
  byCredential(count: CallerCount): boolean
}

/**
 * The budgets of POST /tokens/verify's callers (docs/security.md, second audit, item 1): a backend that
 * presents a live verify credential is counted per credential (VERIFY_CLIENT_RATE_LIMIT a minute),
 * wherever it calls from, so junk tokens sent through it spend its own budget and nobody else's; everyone
 * else per address (600 a minute). A key that is no live verify credential counts as anonymous.
 *
 * A key this instance has not seen lately is looked up in the database once. That look-up is paid from
 * a budget of look-ups per address (as many as the anonymous budget, kept apart from it), never from the
 * anonymous budget itself: a live credential is never refused because its address spent the anonymous
 * budget, not even on its first call. A key found to be no verify credential is then counted as
 * anonymous (made-up keys cost the address), and an address that spent its look-ups gets no more until
 * its window ends (its keys count as none meanwhile), so a flood of made-up keys costs at most the
 * anonymous rate in look-ups.
 *
 * The route (its preValidation hook) and the verify lane both count through this one object.
 */
export function verifyCallers(deps: {
  anonymous: RouteLimiter
  credentials: RouteLimiter
  /** The look-ups of unknown keys per address (see above). */
  lookups: RouteLimiter
  lookup: CredentialLookup
}): VerifyCallers {
  const { anonymous, credentials, lookups, lookup } = deps
  const hit = (limiter: RouteLimiter, key: string): CallerCount | Promise<CallerCount> => {
    const n = limiter.store.hit(key, limiter.windowMs)
    if (typeof n === 'number') return { limiter, count: n, resetInMs: limiter.store.resetInMs }
    return n.then(([count, resetInMs]) => ({ limiter, count, resetInMs }))
  }
  const as = (ip: string, id: string | null) => (id === null ? hit(anonymous, ip) : hit(credentials, id))
  const lookedUp = async (ip: string, apiKey: string): Promise<CallerCount> => {
    const allowance = await hit(lookups, ip)
    // Counters that failed (-1, Redis unreachable) let the look-up through, as every limit fails open.
    if (allowance.count > lookups.max) return hit(anonymous, ip)
    return as(ip, await lookup.fetch(apiKey))
  }
  return {
    count(address, apiKey) {
      // Every budget per address counts an IPv6 caller by its /64 (platform/client-address.ts).
      const ip = addressKey(address)
      if (apiKey === undefined) return hit(anonymous, ip)
      const known = lookup.known(apiKey)
      if (known === undefined) return lookedUp(ip, apiKey)
      if (known instanceof Promise) return known.then((id) => as(ip, id))
      return as(ip, known)
    },
    byCredential: (c) => c.limiter === credentials,
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
 * A route's limit under these budgets, a preValidation hook: `credentialOf` reads the request's verify
 * credential (POST /tokens/verify: from the parsed, not yet validated body, so a request the schema
 * refuses is counted too; GET /tokens/check: from a header). Sets the `x-ratelimit-*` headers of the
 * budget the request was counted under; over it, 429. A request the verify lane counted and handed
 * over is not counted again.
 */
export function limitVerifyCallers(
  callers: VerifyCallers,
  credentialOf: (request: FastifyRequest) => string | undefined,
) {
  return (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const ip = request.ip
    const finish = (c: CallerCount) =>
      done(c.count < 0 ? undefined : applyCount(reply, c.limiter, ip, c.count, c.resetInMs))
    const counted = (request.raw as CountedRequest)[COUNTED] ?? callers.count(ip, credentialOf(request))
    if (counted instanceof Promise) void counted.then(finish, done)
    else finish(counted)
  }
}
