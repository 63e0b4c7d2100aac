import { type VerifiedClaims, type Verifier, VerifierError } from './verifier.js'

/**
 * An event id as routes carry it: a string or number. Anything else (undefined, null, '', an array
 * from a wildcard parameter) names no event.
 */
export type EventRef = unknown

export interface ScopeRequirement<Req> {
  /**
   * The event the scopes are needed for, read from the request (usually a route parameter). Without
   * it, or when it names no event, the scopes must be granted for every event ("*").
   */
  event?: (request: Req) => EventRef
}

export interface GuardOptions {
  /**
   * Token types (the claims' `type`) the guard accepts; default `['access']`. POST /tokens/verify also
   * calls refresh, offline and session tokens valid, so without this check a refresh token (30 days,
   * meant only for POST /auth/refresh) or a device's offline token would pass for an access token.
   * List the others only on routes built for them, e.g. `['access', 'offline']` for a scanner's sync.
   */
  types?: readonly string[]
}

export const DEFAULT_TOKEN_TYPES: readonly string[] = ['access']

/** What a guard decided: go on with the claims, or answer with this status, body and headers. */
export type Decision =
  | { ok: true; claims: VerifiedClaims }
  | {
      ok: false
      status: 401 | 403 | 503
      body: { detail: string }
      headers: Record<string, string>
      /** Why no answer was obtained (503 only), for the caller's log. */
      cause?: unknown
    }

const UNAUTHORIZED: Decision = {
  ok: false,
  status: 401,
  body: { detail: 'Could not validate credentials' },
  headers: { 'www-authenticate': 'Bearer' },
}
const FORBIDDEN: Decision = {
  ok: false,
  status: 403,
  body: { detail: 'Not enough permissions' },
  headers: {},
}

/** The token of an `Authorization: Bearer …` header, or null. */
export function bearerToken(header: string | undefined): string | null {
  if (typeof header !== 'string') return null
  const m = /^Bearer +(\S+)\s*$/i.exec(header)
  return m ? m[1]! : null
}

/** Whether the claims grant every scope for the event (directly or through "*"). */
export function grants(claims: VerifiedClaims, scopes: readonly string[], event: EventRef): boolean {
  const p = claims.permissions
  if (!p) return false
  const named = (typeof event === 'string' && event !== '') || typeof event === 'number'
  const here = named ? p[String(event)] : undefined
  const everywhere = p['*']
  return scopes.every((s) => Boolean(here?.includes(s) || everywhere?.includes(s)))
}

/**
 * The framework-neutral part of both middlewares: authenticate the header and the token's type, then
 * check the scopes.
 * `event` is only read once the caller is authenticated, so a bad token is 401 whatever the route.
 */
export async function decide(
  verifier: Verifier,
  authorization: string | undefined,
  scopes: readonly string[],
  event: () => EventRef,
  types: readonly string[] = DEFAULT_TOKEN_TYPES,
): Promise<Decision> {
  const token = bearerToken(authorization)
  if (!token) return UNAUTHORIZED
  let claims: VerifiedClaims
  try {
    claims = await verifier.verify(token)
  } catch (err) {
    if (err instanceof VerifierError && err.kind === 'invalid') return UNAUTHORIZED
    // Anything else means no answer was obtained: refusing as 503 keeps a fault from looking like a bad token.
    const retryAfter = err instanceof VerifierError ? err.retryAfterSeconds : undefined
    return {
      ok: false,
      status: 503,
      body: { detail: 'Authentication service unavailable' },
      headers: retryAfter ? { 'retry-after': String(retryAfter) } : {},
      cause: err,
    }
  }
  // A valid token of another type is not a credential for this route: the same 401 as a bad token.
  if (!types.includes(claims.type)) return UNAUTHORIZED
  if (scopes.length > 0 && !grants(claims, scopes, event())) return FORBIDDEN
  return { ok: true, claims }
}

export function scopeList(scopes: string | readonly string[]): readonly string[] {
  return typeof scopes === 'string' ? [scopes] : scopes
}
