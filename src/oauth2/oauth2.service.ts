import type { AuditLog } from '../audit/audit.store.js'
import type { Claims } from '../tokens/claims.js'
import type { TokenService } from '../tokens/token.service.js'

export const INTROSPECT_URL = '/oauth2/introspect'
export const REVOKE_URL = '/oauth2/revoke'
export const METADATA_URL = '/.well-known/oauth-authorization-server'

/** RFC 7662's answer for any token that is not good: this and nothing else. */
const INACTIVE = Object.freeze({ active: false as const })

/**
 * The RFC 7662 answer for what the token service made of a token: `active: true` with the token's
 * claims (`sub`, `exp`, `iat`, `jti`, `role`, `iss` and `aud` where set, the service's own: `type`,
 * `event_ids`, `permissions`, ...) and `token_type` as RFC 6749 means it (how the token is presented:
 * `bearer`, as the service's token answers say), or `{"active": false}`.
 */
export function introspection(claims: Claims | null): Record<string, unknown> {
  return claims === null ? INACTIVE : { active: true, token_type: 'bearer', ...claims }
}

/**
 * The RFC 8414 metadata: the issuer (PUBLIC_BASE_URL, without a trailing slash), both endpoints and
 * how a client authenticates at each (introspection: a verify credential as a Bearer token, named by
 * the OAuth Access Token Types registry as RFC 8414 section 2 allows; revocation: nothing, possession of
 * the token is the authority), and the documentation. No authorization or token endpoint in the OAuth
 * sense is offered (sign-in is `POST /auth/login`, with its own body), so `response_types_supported`,
 * which RFC 8414 requires, is empty; no `jwks_uri`, since access tokens are HS256 and opaque to clients
 * (POST /tokens/verify and introspection are how a token is checked).
 */
export function authorizationServerMetadata(publicBaseUrl: string) {
  const issuer = publicBaseUrl.replace(/\/+$/, '')
  return {
    issuer,
    introspection_endpoint: `${issuer}${INTROSPECT_URL}`,
    introspection_endpoint_auth_methods_supported: ['Bearer'],
    revocation_endpoint: `${issuer}${REVOKE_URL}`,
    revocation_endpoint_auth_methods_supported: ['none'],
    response_types_supported: [] as string[],
    service_documentation: `${issuer}/docs`,
  }
}

export interface OAuth2ServiceDeps {
  tokens: TokenService
  audit: AuditLog
}

/** RFC 7662 introspection and RFC 7009 revocation over the token service. */
export class OAuth2Service {
  constructor(private readonly deps: OAuth2ServiceDeps) {}

  /**
   * Decided by the token service's own check, the one POST /tokens/verify makes (signature, audience,
   * issuer, expiry, the revocation list, a credential's resolver), with one difference: a refresh token
   * is never active here. A resource server introspects the tokens presented to it, and a refresh token
   * is good only at POST /auth/refresh; a resource server that looks at `active` alone must not take one
   * (so its row is not even read). The token type hint is not needed: every kind is checked anyway.
   */
  introspect(token: string): Record<string, unknown> | Promise<Record<string, unknown>> {
    const claims = this.deps.tokens.introspect(token, false)
    return claims instanceof Promise ? claims.then(introspection) : introspection(claims)
  }

  /**
   * Ends the presented token (the token service's `revokePresented`) and audits what was ended; a token
   * that was not good ends nothing and leaves no record, and its presenter gets the same answer.
   */
  async revoke(token: string, ip: string): Promise<void> {
    const ended = await this.deps.tokens.revokePresented(token)
    if (!ended) return
    await this.deps.audit.record({
      kind: 'token_revoked',
      actor: `${ended.role}:${ended.sub}`,
      ip,
      outcome: 'success',
      detail: { type: ended.type, jti: ended.jti },
    })
  }
}
