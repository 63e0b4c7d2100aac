import type { NextFunction, Request, RequestHandler, Response } from 'express'
import {
  DEFAULT_TOKEN_TYPES,
  decide,
  type EventRef,
  type GuardOptions,
  type ScopeRequirement,
  scopeList,
} from './guard.js'
import type { VerifiedClaims, Verifier } from './verifier.js'

export interface ExpressGuardOptions extends GuardOptions {
  /** Told why a request was answered 503 (the auth service gave no answer), e.g. to log it. */
  onUnavailable?: (cause: unknown, request: Request) => void
}

export interface ExpressGuard {
  /** Middleware: a valid bearer token is required; no scope check. */
  authenticate: RequestHandler
  /**
   * Middleware: a valid bearer token granting every one of `scopes` for the event the route names,
   * e.g. `requireScopes('ticket:scan', { event: (req) => req.params.eventId })`.
   */
  requireScopes(scopes: string | readonly string[], requirement?: ScopeRequirement<Request>): RequestHandler
  /** The claims behind a request that passed one of the middlewares above. */
  claimsOf(request: Request): VerifiedClaims
}

/**
 * Middleware for an Express backend. Refusals are answered directly (401 with WWW-Authenticate:
 * Bearer, 403, 503 with Retry-After when known), each as `{"detail": …}`; only a fault of the
 * middleware itself reaches `next(err)`. Only access tokens pass unless `options.types` lists others.
 * Needs Express 5.
 */
export function createExpressGuard(verifier: Verifier, options: ExpressGuardOptions = {}): ExpressGuard {
  const types = options.types ?? DEFAULT_TOKEN_TYPES
  const claims = new WeakMap<Request, VerifiedClaims>()

  function middleware(scopes: readonly string[], event: (request: Request) => EventRef): RequestHandler {
    // Express 5 passes a rejected promise of a handler on to next(err).
    return async (req: Request, res: Response, next: NextFunction) => {
      const decision = await decide(verifier, req.headers.authorization, scopes, () => event(req), types)
      if (decision.ok) {
        claims.set(req, decision.claims)
        next()
        return
      }
      if (decision.status === 503) options.onUnavailable?.(decision.cause, req)
      res.status(decision.status).set(decision.headers).json(decision.body)
    }
  }

  return {
    authenticate: middleware([], () => undefined),
    requireScopes(scopes, requirement = {}) {
      const event = requirement.event
      return middleware(scopeList(scopes), (req) => event?.(req))
    },
    claimsOf(request) {
      const found = claims.get(request)
      if (!found) throw new Error('claimsOf() on a route without authenticate/requireScopes')
      return found
    },
  }
}
