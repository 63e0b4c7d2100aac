import type { preHandlerAsyncHookHandler, preParsingAsyncHookHandler } from 'fastify'
import type { Clock } from '../platform/clock.js'
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
 * the freshness window. It reads the token alone (decisions.md §2), so it runs after `protect`.
 */
export function requireFreshMfa(freshness: MfaFreshness): preHandlerAsyncHookHandler {
  return async (request) => {
    const state = mfaFreshness(claimsOf(request), freshness)
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
  opts: GuardOptions = {},
): { preParsing: preParsingAsyncHookHandler; preHandler: preHandlerAsyncHookHandler[] } {
  const guard = protect(tokens, opts)
  return { preParsing: guard.preParsing, preHandler: [guard.preHandler, requireFreshMfa(freshness)] }
}
