import type { Role } from '../identities/grants.js'
import type { Clock } from '../platform/clock.js'
import {
  type AppError,
  errorBody,
  ForbiddenError,
  ServiceUnavailableError,
  UnauthorizedError,
} from '../platform/errors.js'
import { type Claims, hasScope, reachesEvent, type TokenType } from './claims.js'
import { bearerOf } from './guard.js'
import type { TokenService } from './token.service.js'

/**
 * GET /tokens/check, the answer a gateway (nginx `auth_request`, Caddy `forward_auth`, Traefik
 * `forwardAuth`, Envoy `ext_authz`) asks before it lets a request through: the decision and the
 * answers, shared by the route (check.routes.ts) and the verify lane (check-lane.ts). Whether a token
 * is good is asked of `TokenService.introspect`, the one decision POST /tokens/verify uses too, so
 * whatever verify refuses, the check refuses. What this module adds is the gateway's requirements.
 */

/** The requirement names: query parameters of the check URL, or `Wristband-Require-<name>` headers. */
export const REQUIREMENT_NAMES = ['role', 'type', 'event', 'scope'] as const
export type RequirementName = (typeof REQUIREMENT_NAMES)[number]
export const REQUIRE_HEADER = 'wristband-require-'

// Every role and token type, checked against their types so that a new one is not forgotten here.
const ROLES = { admin: 0, operator: 0, network_manager: 0, consumer: 0, event_client: 0 } satisfies Record<
  Role,
  0
>
const TYPES = { access: 0, refresh: 0, offline: 0, session: 0, api_key: 0 } satisfies Record<TokenType, 0>

/** A comma-separated list of one or more of `words`. */
function listPattern(words: readonly string[]): string {
  const one = `(?:${words.join('|')})`
  return `^${one}(?:,${one})*$`
}
const SCOPE = '[a-z0-9_.-]+:[a-z0-9_.*-]+'

/**
 * What a requirement's value may be (the route's schema and the lane take exactly these): lists of
 * known roles and token types (an unknown name is a misconfigured gateway, refused with 422 rather than
 * read as no requirement), scopes as `area:action`, an event as its id in canonical decimal.
 */
export const REQUIREMENT_FORMS = {
  role: { pattern: listPattern(Object.keys(ROLES)), maxLength: 200 },
  type: { pattern: listPattern(Object.keys(TYPES)), maxLength: 200 },
  scope: { pattern: `^${SCOPE}(?:,${SCOPE})*$`, maxLength: 1000 },
} as const

/** One source's requirements (the query, or the headers), as validated. */
export interface RequirementValues {
  role?: string | undefined
  type?: string | undefined
  event?: number | undefined
  scope?: string | undefined
}

/**
 * What a check requires, from every source that names something: each source narrows (both must be
 * met when the query and a header name the same requirement).
 */
export interface Requirements {
  /** Per source, the roles it allows. */
  roles: string[][]
  /** Per source, the token types it allows; `access` alone when no source names any. */
  types: string[][]
  /** Events the token must reach. */
  events: number[]
  /** Scopes the token must hold at each event of `events` (or at every event, "*", when none is named). */
  scopes: string[]
}

const ACCESS_ONLY = [['access']]

export function requirementsOf(...sources: RequirementValues[]): Requirements {
  const out: Requirements = { roles: [], types: [], events: [], scopes: [] }
  for (const s of sources) {
    if (s.role !== undefined) out.roles.push(s.role.split(','))
    if (s.type !== undefined) out.types.push(s.type.split(','))
    if (s.event !== undefined) out.events.push(s.event)
    if (s.scope !== undefined) out.scopes.push(...s.scope.split(','))
  }
  if (out.types.length === 0) out.types = ACCESS_ONLY
  return out
}

/** Why a check refuses: no token, a token that is not good (or of a type not allowed), a requirement unmet. */
export type Refusal = 'missing' | 'invalid' | 'insufficient'

/**
 * The claims of the request's bearer token when it is good now (TokenService.introspect: signature,
 * audience, issuer, expiry, revocation, the refresh token's row, an API key's state), else why not.
 * A promise when the token service needs a look-up; it rejects when the instance cannot decide.
 */
export function authenticate(
  tokens: Pick<TokenService, 'introspect'>,
  authorization: string | undefined,
  maxToken: number,
): Claims | Refusal | Promise<Claims | Refusal> {
  const token = bearerOf(authorization)
  if (token === null) return 'missing'
  if (token.length > maxToken) return 'invalid'
  const claims = tokens.introspect(token)
  if (claims instanceof Promise) return claims.then((c) => c ?? 'invalid')
  return claims ?? 'invalid'
}

/**
 * Whether good claims meet the requirements: a token type not allowed is an invalid token for the
 * gateway (401: a refresh token is no bearer token), an unmet role, event or scope is 403. Events and
 * scopes are read through the helpers every route uses (`reachesEvent`, `hasScope`: the token's
 * `permissions` per event id, or "*" for every event).
 */
export function judge(claims: Claims, req: Requirements): Refusal | null {
  for (const allowed of req.types) if (!allowed.includes(claims.type)) return 'invalid'
  for (const allowed of req.roles) if (!allowed.includes(claims.role)) return 'insufficient'
  for (const event of req.events) if (!reachesEvent(claims, event)) return 'insufficient'
  const places: (number | '*')[] = req.events.length > 0 ? req.events : ['*']
  for (const scope of req.scopes)
    for (const place of places) if (!hasScope(claims, place, scope)) return 'insufficient'
  return null
}

/** The error of a refusal, or of a check that could not be decided (503), in the one error shape. */
export function refusalError(refusal: Refusal | 'undecided'): AppError {
  switch (refusal) {
    case 'missing':
      return new UnauthorizedError('Not authenticated')
    case 'invalid':
      return new UnauthorizedError('Could not validate credentials', 'invalid_token')
    case 'insufficient':
      return new ForbiddenError('The token does not meet the requirement', 'insufficient_scope')
    case 'undecided':
      return new ServiceUnavailableError()
  }
}

/** One refusal as the lane writes it: status, headers besides the common ones, and body text. */
export interface RefusalAnswer {
  status: number
  headers: string[]
  body: string
}

/**
 * The requests a cached answer depends on: the token and the requirement headers (the query is in the
 * URL, which every cache keys on).
 */
const VARY = ['authorization', ...REQUIREMENT_NAMES.map((n) => `${REQUIRE_HEADER}${n}`)].join(', ')

/**
 * The headers of the check's answers, shared by the route and the lane. An allowed request's claim
 * headers are built once per claims object (which the token codec keeps while it remembers the
 * token), so a repeated token costs no serialisation; the refusals' texts are made once.
 */
export function checkAnswers(deps: { clock: Clock; cacheSeconds: number }) {
  const { clock, cacheSeconds } = deps
  const claimHeaders = new WeakMap<Claims, string[]>()
  const refusals = new Map<Refusal | 'undecided', RefusalAnswer>()
  for (const r of ['missing', 'invalid', 'insufficient', 'undecided'] as const) {
    const err = refusalError(r)
    const headers = Object.entries(err.headers).flat()
    refusals.set(r, { status: err.statusCode, headers, body: JSON.stringify(errorBody(err)) })
  }
  return {
    /**
     * The headers of a 200, as name, value, name, value…: the claims, and `Cache-Control`: no-store,
     * or with CHECK_CACHE_SECONDS at most that long and never past the token's expiry.
     */
    allowed(claims: Claims): string[] {
      let headers = claimHeaders.get(claims)
      if (headers === undefined) {
        headers = [
          'x-auth-subject',
          String(claims.sub),
          'x-auth-role',
          String(claims.role),
          'x-auth-token-type',
          String(claims.type),
          'x-auth-expires',
          String(claims.exp),
        ]
        if (Array.isArray(claims.event_ids) && claims.event_ids.length > 0)
          headers.push('x-auth-event-ids', claims.event_ids.join(','))
        headers.push('x-auth-claims', Buffer.from(JSON.stringify(claims)).toString('base64url'))
        headers.push('cache-control', 'no-store')
        claimHeaders.set(claims, headers)
      }
      if (cacheSeconds === 0) return headers
      const seconds = Math.min(cacheSeconds, Math.floor(claims.exp - clock.now() / 1000))
      if (seconds <= 0) return headers
      const cached = headers.slice(0, -2)
      cached.push('cache-control', `max-age=${seconds}, must-revalidate`, 'vary', VARY)
      return cached
    },
    refusal(r: Refusal | 'undecided'): RefusalAnswer {
      return refusals.get(r)!
    },
  }
}

export type CheckAnswers = ReturnType<typeof checkAnswers>
