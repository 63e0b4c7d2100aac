import type { FastifyRequest, preHandlerAsyncHookHandler, preParsingAsyncHookHandler } from 'fastify'
import type { Role } from '../identities/grants.js'
import { ForbiddenError, UnauthorizedError } from '../platform/errors.js'
import type { Claims } from './claims.js'
import type { TokenService } from './token.service.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Claims of the verified bearer token, set on protected routes. */
    auth: Claims | null
  }
}

/** The bearer credential of a request, or null. */
export function bearerToken(request: FastifyRequest): string | null {
  return bearerOf(request.headers.authorization)
}

/** The credential of an `Authorization: Bearer` header value, or null (the verify lane reads it raw). */
export function bearerOf(authorization: string | undefined): string | null {
  if (typeof authorization !== 'string') return null
  const m = /^Bearer +(\S+)\s*$/i.exec(authorization)
  return m ? m[1]! : null
}

export interface GuardOptions {
  /** Token types accepted; access tokens unless said otherwise. */
  types?: readonly string[]
  /** Roles allowed; any role when absent. A wrong role is 403, a bad token 401. */
  roles?: readonly Role[]
}

/**
 * Route hooks for a protected route. Authentication runs before the body is parsed (after the rate
 * limit, which is an onRequest hook) and the role check after validation, so the documented order
 * 429 → 401 → 422 → 403 holds. A revoked token (its jti on the revocation list, or a device's offline
 * token whose device's tokens were ended) is 401 here as at /tokens/verify. Spread the result into the
 * route options.
 */
export function protect(
  tokens: TokenService,
  opts: GuardOptions = {},
): { preParsing: preParsingAsyncHookHandler; preHandler: preHandlerAsyncHookHandler } {
  const types = opts.types ?? ['access']
  return {
    async preParsing(request, _reply, payload) {
      const token = bearerToken(request)
      if (!token) throw new UnauthorizedError('Not authenticated')
      request.auth = await tokens.authenticate(token, types)
      return payload
    },
    async preHandler(request) {
      if (opts.roles && !opts.roles.includes(claimsOf(request).role)) throw new ForbiddenError()
    },
  }
}

/** The claims of a protected route's request. */
export function claimsOf(request: FastifyRequest): Claims {
  if (!request.auth) throw new UnauthorizedError('Not authenticated')
  return request.auth
}
