import type { FastifyReply, FastifyRequest, preHandlerAsyncHookHandler, RouteGenericInterface } from 'fastify'
import {
  DEFAULT_TOKEN_TYPES,
  type Decision,
  decide,
  type EventRef,
  type GuardOptions,
  type ScopeRequirement,
  scopeList,
} from './guard.js'
import type { VerifiedClaims, Verifier } from './verifier.js'

export interface FastifyGuard {
  /** preHandler: a valid bearer token is required; no scope check. */
  authenticate: preHandlerAsyncHookHandler
  /**
   * preHandler: a valid bearer token granting every one of `scopes` for the event the route names,
   * e.g. `requireScopes('ticket:scan', { event: (req) => req.params.eventId })`.
   */
  requireScopes<R extends RouteGenericInterface = { Params: Record<string, string> }>(
    scopes: string | readonly string[],
    requirement?: ScopeRequirement<FastifyRequest<R>>,
  ): preHandlerAsyncHookHandler
  /** The claims behind a request that passed one of the hooks above. */
  claimsOf(request: FastifyRequest): VerifiedClaims
}

/**
 * Route hooks for a Fastify backend. Refusals are sent from the hook (401 with WWW-Authenticate:
 * Bearer, 403, 503 with Retry-After when known), each as `{"detail": …}`, so the backend's own error
 * handler never sees them and an unreachable auth service cannot turn into a 500. Only access tokens
 * pass unless `options.types` lists others.
 */
export function createFastifyGuard(verifier: Verifier, options: GuardOptions = {}): FastifyGuard {
  const types = options.types ?? DEFAULT_TOKEN_TYPES
  const claims = new WeakMap<FastifyRequest, VerifiedClaims>()

  function hook(
    scopes: readonly string[],
    event: (request: FastifyRequest) => EventRef,
  ): preHandlerAsyncHookHandler {
    return async (request, reply) => {
      const decision = await decide(
        verifier,
        request.headers.authorization,
        scopes,
        () => event(request),
        types,
      )
      if (decision.ok) {
        claims.set(request, decision.claims)
        return
      }
      if (decision.status === 503) request.log.warn({ err: decision.cause }, 'token verification unavailable')
      return refuse(reply, decision)
    }
  }

  return {
    authenticate: hook([], () => undefined),
    requireScopes<R extends RouteGenericInterface>(
      scopes: string | readonly string[],
      requirement: ScopeRequirement<FastifyRequest<R>> = {},
    ) {
      const event = requirement.event
      // The hook runs on the route it is attached to, whose request is typed with that route's generics.
      return hook(scopeList(scopes), (request) => event?.(request as FastifyRequest<R>))
    },
    claimsOf(request) {
      const found = claims.get(request)
      if (!found) throw new Error('claimsOf() on a route without authenticate/requireScopes')
      return found
    },
  }
}

function refuse(reply: FastifyReply, decision: Extract<Decision, { ok: false }>): FastifyReply {
  return reply.code(decision.status).headers(decision.headers).send(decision.body)
}
