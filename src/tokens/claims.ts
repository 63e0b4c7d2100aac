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
  /** The device's token generation when the offline token was issued (absent: 0). */
  device_gen?: number
  /** An offline token of a device that has no device key (see isKeylessDevice). */
  device_keyless?: boolean
  /** The account's token generation when the token was minted (absent: 0); see accountTokensJti. */
  account_gen?: number
  event_id?: number
  [extra: string]: unknown
}

/** Why a key-less device's feed or upload is refused (403 `device_key_required`). */
export const KEYLESS_DEVICE =
  'A device without a device key does not sync: give it a key (wristband device rotate-key, or a set-up code)'

/**
 * Whether the claims are an offline token of a device without a device key (DEVICE_KEYS_REQUIRED=false):
 * such a device holds no `sync:*` scope, and the scanner feed and scan uploads answer it 403
 * `device_key_required`.
 */
export function isKeylessDevice(claims: Pick<Claims, 'device_keyless'>): boolean {
  return claims.device_keyless === true
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

/**
 * The revocation-list entry that ends one generation of the offline tokens issued to a device: archiving
 * the device, rotating its key or `wristband device revoke` writes it and starts the next generation, so
 * every token issued before dies at once, fleet-wide, through the revocation list every instance follows.
 * Tokens issued before generations existed carry none: they are generation 0.
 */
export function deviceTokensJti(deviceId: string | number, generation: number): string {
  return `device:${deviceId}:${generation}`
}

/**
 * The revocation-list entry that ends one token generation of an account (disable, an administrator's
 * password reset, an MFA reset, `wristband admin end-tokens`): every token minted for the account under
 * that generation, whatever its type and whether bound to a device, is refused from then on. Tokens
 * minted before generations existed carry none: they are generation 0.
 */
export function accountTokensJti(role: string, sub: string | number, generation: number): string {
  return `${ACCOUNT_PREFIX}${role}:${sub}:${generation}`
}

/** The prefix of account-generation entries on the revocation list. */
export const ACCOUNT_PREFIX = 'account:'

/** The account generation a token was minted under (0 for a token minted before generations). */
export function accountGenerationOf(claims: Pick<Claims, 'account_gen'>): number {
  return typeof claims.account_gen === 'number' ? claims.account_gen : 0
}

/** The device-generation entry that would revoke these claims, or undefined for a token bound to no device. */
export function deviceGenerationOf(claims: Claims): string | undefined {
  if (claims.type !== 'offline' || claims.device_id === undefined || claims.device_id === null)
    return undefined
  return deviceTokensJti(claims.device_id, typeof claims.device_gen === 'number' ? claims.device_gen : 0)
}
