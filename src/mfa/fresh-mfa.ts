import type { preHandlerAsyncHookHandler, preParsingAsyncHookHandler } from 'fastify'
import type { AuditLog } from '../audit/audit.store.js'
import { adminMfaEnabled } from '../identities/identities.store.js'
import type { AuthEvents } from '../platform/auth-events.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { ForbiddenError } from '../platform/errors.js'
import type { Claims } from '../tokens/claims.js'
import { claimsOf, type GuardOptions, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'

export interface MfaFreshness {
  clock: Clock
  windowHours: number
}

/** Whether the token says MFA was verified within the freshness window, and if not, why. */
export function mfaFreshness(
  claims: Claims,
  { clock, windowHours }: MfaFreshness,
): 'fresh' | 'mfa_never' | 'mfa_stale' {
  const verifiedAt = claims.mfa_verified_at
  if (typeof verifiedAt !== 'number') return 'mfa_never'
  return clock.now() / 1000 - verifiedAt > windowHours * 3600 ? 'mfa_stale' : 'fresh'
}

/**
 * A preHandler that lets a request through only when its access token says MFA was verified within
 * the freshness window. It reads the token alone (docs/specification.md), so it runs after `protect`.
 */
export function requireFreshMfa(freshness: MfaFreshness, events: AuthEvents): preHandlerAsyncHookHandler {
  return async (request) => {
    const state = mfaFreshness(claimsOf(request), freshness)
    if (state !== 'fresh') events.count('mfa_challenge', 'success', 'fresh_mfa')
    if (state === 'mfa_never')
      throw new ForbiddenError('MFA verification required', 'require_mfa', { reason: 'mfa_never' })
    if (state === 'mfa_stale')
      throw new ForbiddenError('MFA verification is too old; verify again', 'require_mfa', {
        reason: 'mfa_stale',
      })
  }
}

/** `protect(...)` plus the fresh-MFA check, to spread into the options of a sensitive route. */
export function protectWithFreshMfa(
  tokens: TokenService,
  freshness: MfaFreshness,
  events: AuthEvents,
  opts: GuardOptions = {},
): { preParsing: preParsingAsyncHookHandler; preHandler: preHandlerAsyncHookHandler[] } {
  const guard = protect(tokens, opts)
  return { preParsing: guard.preParsing, preHandler: [guard.preHandler, requireFreshMfa(freshness, events)] }
}

/** Route hooks, to spread into the options of a route that creates lasting credentials or accounts. */
export type ProtectCredentials = (opts?: GuardOptions) => {
  preParsing: preParsingAsyncHookHandler
  preHandler: preHandlerAsyncHookHandler[]
}

/**
 * The guard of the routes that create lasting credentials or accounts, and of `POST /admin/mfa/setup`
 * (decisions of 2026-11-25): `protect(...)`, then, while the calling administrator's MFA is enabled, a
 * fresh `mfa_verified_at` is needed (403 `{"detail", "error": "mfa_required"}`, audited as denied), so
 * a password alone never creates what outlives the session. An administrator with a passkey counts as
 * one whose MFA is on. Other roles, and administrators without MFA (whose first enrolment
 * needs only the password), pass as `protect` lets them.
 */
export function credentialGuard(deps: {
  db: Db
  tokens: TokenService
  audit: AuditLog
  freshness: MfaFreshness
  authEvents: AuthEvents
  /** Whether the administrator has a passkey: a second factor too, so a password alone adds none. */
  hasPasskey?: (adminId: number) => Promise<boolean>
}): ProtectCredentials {
  const whileMfaEnabled: preHandlerAsyncHookHandler = async (request) => {
    const claims = claimsOf(request)
    if (claims.role !== 'admin' || mfaFreshness(claims, deps.freshness) === 'fresh') return
    const adminId = Number(claims.sub)
    const secondFactor =
      (await adminMfaEnabled(deps.db, adminId)) || ((await deps.hasPasskey?.(adminId)) ?? false)
    if (!secondFactor) return
    deps.authEvents.count('mfa_challenge', 'success', 'fresh_mfa')
    await deps.audit.record({
      kind: 'mfa_required',
      actor: `admin:${claims.sub}`,
      ip: request.ip,
      outcome: 'denied',
      detail: { route: `${request.method} ${request.routeOptions.url}` },
    })
    throw new ForbiddenError(
      'While MFA is on this needs a fresh MFA verification: verify a code of your authenticator first',
      'mfa_required',
    )
  }
  return (opts = {}) => {
    const guard = protect(deps.tokens, opts)
    return { preParsing: guard.preParsing, preHandler: [guard.preHandler, whileMfaEnabled] }
  }
}
