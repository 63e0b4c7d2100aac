import type { FastifyRequest, preHandlerAsyncHookHandler, preParsingAsyncHookHandler } from 'fastify'
import { apiKeyClaims } from '../api-keys/api-key.credential.js'
import type { ApiKeyCache, CachedKey } from '../api-keys/api-key-cache.js'
import { assignOwnPartner, touchApiKey } from '../api-keys/api-keys.store.js'
import { findEventSummary } from '../events/events.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { ForbiddenError, UnauthorizedError } from '../platform/errors.js'
import { perCredential, type RouteLimit } from '../platform/rate-limit.js'
import { hasScope } from '../tokens/claims.js'

/**
 * The partner behind a request: its API key, the partner the key belongs to (whose transfers,
 * receiver and deliveries it reaches, and no other partner's) and the one event of the key.
 */
export interface Partner {
  keyId: number
  partnerId: number
  eventId: number
  eventUid: string
  /** The event's IANA time zone, which its local times (`used_timestamp`, `ticket_date`) are in */
  eventTimezone: string
}

/**
 * docs/specification.md: requests per minute and address on the partner-facing endpoints (holder; and the
 * partner, edge and webhook ones for requests without a valid API key, decisions of 2026-11-25); it
 * sits beside the partner hooks, which those features import too. A valid key counts against its own
 * limit, PARTNER_RATE_LIMIT.
 */
export const PARTNER_ADDRESS_RATE_LIMIT = 120

export interface PartnerAuthDeps {
  db: Db
  clock: Clock
  /** This instance's one cache of API keys */
  apiKeys: ApiKeyCache
  /** PARTNER_RATE_LIMIT: requests per minute of one API key */
  partnerRateLimit: number
}

/**
 * Route hooks for a partner endpoint. The key is read from the `api_key` header and found in the key
 * cache (401 when missing, unknown or revoked) before the body is parsed; after validation the key
 * must hold the access asked for, and an `event_uid` in the body or query must be the key's event
 * (403), so the documented order 401 → 422 → 403 holds.
 */
export function partnerAuth(
  deps: PartnerAuthDeps,
  access: 'read' | 'write',
): {
  config: { rateLimit: RouteLimit }
  preParsing: preParsingAsyncHookHandler
  preHandler: preHandlerAsyncHookHandler
} {
  // The key of a request, looked up once: by the rate limit (which counts a valid key on its own) and
  // then by the authentication hook.
  const found = new WeakMap<FastifyRequest, Promise<CachedKey | null>>()
  const keyOf = (request: FastifyRequest): Promise<CachedKey | null> => {
    let key = found.get(request)
    if (key === undefined) {
      const given = request.headers.api_key
      key = Promise.resolve(typeof given === 'string' && given !== '' ? deps.apiKeys.find(given) : null)
      found.set(request, key)
    }
    return key
  }
  return {
    config: perCredential(PARTNER_ADDRESS_RATE_LIMIT, {
      name: 'partner',
      max: deps.partnerRateLimit,
      of: async (request) => {
        const key = await keyOf(request)
        return key ? key.jti : undefined
      },
    }),
    async preParsing(request, _reply, payload) {
      const given = request.headers.api_key
      if (typeof given !== 'string' || given === '')
        throw new UnauthorizedError(
          /^bearer\s/i.test(request.headers.authorization ?? '')
            ? 'Missing api_key header: a partner API key goes in the api_key header, not in Authorization: Bearer'
            : 'Missing api_key header',
        )
      const entry = await keyOf(request)
      if (!entry) throw new UnauthorizedError('Invalid API key')
      const { key } = entry
      const event = await findEventSummary(deps.db, key.event_id)
      if (!event) throw new UnauthorizedError('Invalid API key')
      const now = deps.clock.now()
      if (deps.apiKeys.touchDue(entry, now)) await touchApiKey(deps.db, key.id, now)
      let partnerId = key.partner_id
      if (partnerId === null) {
        partnerId = await assignOwnPartner(deps.db, key, now)
        deps.apiKeys.forget(given)
      }
      request.auth = {
        ...apiKeyClaims(key, now),
        event_uid: event.uid,
        event_timezone: event.timezone,
        partner_id: partnerId,
      }
      return payload
    },
    async preHandler(request) {
      const claims = request.auth!
      const event = String(claims.event_ids![0])
      const allowed =
        access === 'write'
          ? hasScope(claims, event, 'api:write')
          : hasScope(claims, event, 'api:read') || hasScope(claims, event, 'api:write')
      if (!allowed) throw new ForbiddenError(`This API key lacks api:${access}`)
      const named =
        (request.body as { event_uid?: unknown } | undefined)?.event_uid ??
        (request.query as { event_uid?: unknown } | undefined)?.event_uid
      if (named !== undefined && named !== claims.event_uid)
        throw new ForbiddenError('event_uid is not the event of this API key')
    },
  }
}

export function partnerOf(request: FastifyRequest): Partner {
  const c = request.auth
  if (c?.type !== 'api_key') throw new UnauthorizedError('Missing api_key header')
  return {
    keyId: Number(c.sub),
    partnerId: Number(c.partner_id),
    eventId: c.event_ids![0]!,
    eventUid: String(c.event_uid),
    eventTimezone: String(c.event_timezone),
  }
}
