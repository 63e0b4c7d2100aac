import type { Permissions, Role } from '../identities/grants.js'

export type TokenType = 'access' | 'refresh' | 'offline' | 'session' | 'api_key'

export interface Claims {
  type: TokenType
  sub: string
  role: Role
  jti: string
  iat: number
  exp: number
  aud?: string
  iss?: string
  event_ids?: number[]
  permissions?: Permissions
  mfa_verified_at?: number
  device_id?: string | number
  event_id?: number
  [extra: string]: unknown
}

/** Whether the claims grant `scope` for `eventId` (or for every event through "*"). */
export function hasScope(
  claims: Pick<Claims, 'permissions'>,
  eventId: number | string,
  scope: string,
): boolean {
  const p = claims.permissions
  if (!p) return false
  return Boolean(p[String(eventId)]?.includes(scope) || p['*']?.includes(scope))
}

/** Whether the claims reach the event at all (any scope there, or a "*" grant). */
export function reachesEvent(claims: Pick<Claims, 'permissions'>, eventId: number | string): boolean {
  const p = claims.permissions
  return Boolean(p && ((p[String(eventId)]?.length ?? 0) > 0 || (p['*']?.length ?? 0) > 0))
}

export function isSuperadmin(claims: Pick<Claims, 'role' | 'permissions'>): boolean {
  return claims.role === 'admin' && Boolean(claims.permissions?.['*'])
}
