import formbody from '@fastify/formbody'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { Type } from 'typebox'
import type { AuditLog } from '../audit/audit.store.js'
import type { Config } from '../platform/config.js'
import { InvalidOAuthRequestError, UnauthorizedError } from '../platform/errors.js'
import { quietRouteLevel } from '../platform/logging.js'
import { ACCESS, REFRESH } from '../platform/openapi-examples.js'
import { applyCount, perMinute } from '../platform/rate-limit.js'
import { acceptingNul } from '../platform/validation.js'
import type { TokenService } from '../tokens/token.service.js'
import type { CallerCount, VerifyCallers } from '../tokens/verify-callers.js'
import { INVALID_REQUEST } from './oauth2.openapi.js'
import {
  authorizationServerMetadata,
  INTROSPECT_URL,
  METADATA_URL,
  OAuth2Service,
  REVOKE_URL,
} from './oauth2.service.js'

/** Revocations per minute per address: a sign-out revokes one or two tokens; a flood costs writes. */
export const REVOKE_PER_MINUTE = 120

/** The longest token or credential taken (as POST /tokens/verify's). */
const MAX_TOKEN = 8192
const MAX_CREDENTIAL = 256

const FORM_AND_JSON = ['application/x-www-form-urlencoded', 'application/json']

/**
 * The parameters of both endpoints. Unknown parameters are ignored (RFC 6749 section 3.2: a client may
 * send its `client_id` or others); an empty one counts as missing, a repeated one is refused. A token
 * holding U+0000 is simply one the service never issued.
 */
const TokenRequest = acceptingNul(
  Type.Object(
    {
      token: Type.String({ minLength: 1, maxLength: MAX_TOKEN, description: 'The token to look at' }),
      token_type_hint: Type.Optional(
        Type.String({
          maxLength: 64,
          description:
            '`access_token` or `refresh_token` (RFC 7009), or anything else: not needed, and ignored ' +
            '(every kind of token the service issues is checked)',
        }),
      ),
    },
    { additionalProperties: true },
  ),
)

const IntrospectionAnswer = Type.Object(
  {
    active: Type.Boolean({ description: 'Whether the token is good now; false says nothing else' }),
    token_type: Type.Optional(Type.Literal('bearer')),
    sub: Type.Optional(Type.String()),
    exp: Type.Optional(Type.Integer()),
    iat: Type.Optional(Type.Integer()),
    jti: Type.Optional(Type.String()),
    role: Type.Optional(Type.String()),
    iss: Type.Optional(Type.String()),
    aud: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
    type: Type.Optional(
      Type.String({ description: "The service's kind of token: access, offline, session or api_key" }),
    ),
  },
  {
    additionalProperties: true,
    description: "RFC 7662: `active`, and when true the token's claims (the service's own included)",
  },
)

const Metadata = Type.Object({
  issuer: Type.String(),
  introspection_endpoint: Type.String(),
  introspection_endpoint_auth_methods_supported: Type.Array(Type.String()),
  revocation_endpoint: Type.String(),
  revocation_endpoint_auth_methods_supported: Type.Array(Type.String()),
  response_types_supported: Type.Array(Type.String()),
  service_documentation: Type.String(),
})

const errors = {
  400: Type.Ref('ErrorBody'),
  429: Type.Ref('RateLimited'),
  503: Type.Ref('ErrorBody'),
}

/** Why a token request was refused, in RFC 6749's words: missing, repeated, or a bad value. */
function invalidRequest(body: unknown): InvalidOAuthRequestError {
  const params = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>
  const repeated = Object.entries(params).find(
    ([k, v]) => Array.isArray(v) && (k === 'token' || k === 'token_type_hint'),
  )
  if (repeated) return new InvalidOAuthRequestError(`The ${repeated[0]} parameter is given more than once`)
  if (params.token === undefined || params.token === '')
    return new InvalidOAuthRequestError('The token parameter is missing')
  return new InvalidOAuthRequestError('The token or token_type_hint parameter is not valid')
}

/** The verify credential a caller presents: `Authorization: Bearer`, else the `api_key` header. */
function presentedCredential(request: FastifyRequest): string | undefined {
  const auth = request.headers.authorization
  if (typeof auth === 'string') {
    const m = /^Bearer +(\S+) *$/i.exec(auth)
    if (m) return m[1]
  }
  const key = request.headers.api_key
  return typeof key === 'string' && key.length > 0 ? key : undefined
}

export interface OAuth2RoutesDeps {
  tokens: TokenService
  audit: AuditLog
  /** POST /tokens/verify's callers and budgets: introspection is counted under the same ones. */
  callers: VerifyCallers
  config: Pick<Config, 'PUBLIC_BASE_URL' | 'LOG_LEVEL'>
}

/**
 * The standard endpoints beside the service's own: RFC 7662 introspection, RFC 7009 revocation and
 * RFC 8414 metadata, for OAuth libraries and gateways that speak them (docs/gateways.md).
 */
export const oauth2Routes: FastifyPluginAsyncTypebox<OAuth2RoutesDeps> = async (app, deps) => {
  const { callers } = deps
  const service = new OAuth2Service(deps)
  // Form bodies (RFC 6749's encoding) for these routes only; JSON is taken too.
  await app.register(formbody)

  /**
   * The caller of introspection: a verify credential, counted on its own budget as at POST
   * /tokens/verify (VERIFY_CLIENT_RATE_LIMIT a minute); anything else on the address's anonymous
   * budget (600 a minute, the same counters as verify's), then 401. Over a budget: 429 first.
   */
  const authenticateCaller = (
    request: FastifyRequest,
    reply: FastifyReply,
    done: HookHandlerDoneFunction,
  ) => {
    const given = presentedCredential(request)
    const ip = request.ip
    const finish = (c: CallerCount) => {
      const over = c.count < 0 ? undefined : applyCount(reply, c.limiter, ip, c.count, c.resetInMs)
      if (over) return done(over)
      if (callers.byCredential(c)) return done()
      done(
        new UnauthorizedError(
          'A verify credential (an API key with scope tokens:verify) is required',
          given === undefined ? 'unauthorized' : 'invalid_token',
        ),
      )
    }
    const counted = callers.count(
      ip,
      given !== undefined && given.length <= MAX_CREDENTIAL ? given : undefined,
    )
    if (counted instanceof Promise) void counted.then(finish, done)
    else finish(counted)
  }

  app.post(
    INTROSPECT_URL,
    {
      onRequest: authenticateCaller,
      attachValidation: true,
      // A resource server may call it on every request, as verify: no request lines at info.
      logLevel: quietRouteLevel(deps.config.LOG_LEVEL),
      schema: {
        tags: ['oauth2'],
        summary: 'RFC 7662 token introspection: is this token good, and what does it carry',
        description:
          'Form (`application/x-www-form-urlencoded`, as RFC 7662 has it) or JSON, with `token` and an ' +
          'optional `token_type_hint` (ignored). The caller authenticates with a verify credential (an API ' +
          'key with scope `tokens:verify`) as `Authorization: Bearer <key>` or in the `api_key` header, and ' +
          'is counted on its budget as at POST /tokens/verify; without one, 401. The answer is decided as ' +
          'POST /tokens/verify decides: `{"active": false}` and nothing else for any token that is not good ' +
          '(forged, expired, revoked, unknown, garbage) and for refresh tokens, which no resource server ' +
          'takes; else `active: true` with the claims. A malformed request: 400 `invalid_request`.',
        consumes: FORM_AND_JSON,
        security: [{ VerifyCredentialBearer: [] }, { APIKeyHeader: [] }],
        body: TokenRequest,
        response: { 200: IntrospectionAnswer, 401: Type.Ref('ErrorBody'), ...errors },
        doc: {
          operationId: 'introspectToken',
          returns: 'Whether the token is active and, when it is, its claims',
          request: { token: ACCESS, token_type_hint: 'access_token' },
          response: {
            active: true,
            token_type: 'bearer',
            type: 'access',
            sub: '1',
            role: 'admin',
            jti: 'Vg3kX9pQ2mL7rT4wB1nC8f',
            iat: 1782900900,
            exp: 1782901800,
            iss: 'wristband',
            aud: 'wristband',
            event_ids: [1],
            permissions: { '1': ['events:manage', 'reports:read'] },
          },
          errors: {
            400: INVALID_REQUEST,
            401: [
              {
                code: 'invalid_token',
                when: 'the credential given is no live verify credential (none given: 401 without `error`)',
                detail: 'A verify credential (an API key with scope tokens:verify) is required',
              },
            ],
          },
        },
      },
    },
    (request, reply) => {
      if (request.validationError) throw invalidRequest(request.body)
      reply.header('cache-control', 'no-store')
      return service.introspect(request.body.token)
    },
  )

  app.post(
    REVOKE_URL,
    {
      config: perMinute(REVOKE_PER_MINUTE),
      attachValidation: true,
      schema: {
        tags: ['oauth2'],
        summary: 'RFC 7009 token revocation: end the token presented',
        description:
          'Form or JSON, with `token` and an optional `token_type_hint` (ignored). Possession of the token ' +
          'is the authority: no other credential is asked. 200 for any token, known or not, revoked or ' +
          'not (the answer tells nothing). A refresh token ends its whole family (the session), an access ' +
          'or offline token its `jti`, an API key or an operator session token itself; every instance ' +
          'refuses it within the revocation time (at most 1 s). A revocation that cannot be stored (the ' +
          'database unreachable) is 503, never a silent loss. A malformed request: 400 `invalid_request`. ' +
          `${REVOKE_PER_MINUTE} a minute per address.`,
        consumes: FORM_AND_JSON,
        body: TokenRequest,
        response: { 200: Type.Object({}, { additionalProperties: false }), ...errors },
        doc: {
          operationId: 'revokeToken',
          returns: 'The token is ended, or was no good token (the answer does not tell which)',
          request: { token: REFRESH, token_type_hint: 'refresh_token' },
          response: {},
          errors: { 400: INVALID_REQUEST },
        },
      },
    },
    async (request, reply) => {
      if (request.validationError) throw invalidRequest(request.body)
      await service.revoke(request.body.token, request.ip)
      reply.header('cache-control', 'no-store')
      return {}
    },
  )

  const metadata = authorizationServerMetadata(deps.config.PUBLIC_BASE_URL)
  app.get(
    METADATA_URL,
    {
      config: perMinute(600),
      schema: {
        tags: ['oauth2'],
        summary: 'RFC 8414 authorization server metadata',
        description:
          'The issuer (PUBLIC_BASE_URL), the introspection and revocation endpoints with how a client ' +
          'authenticates at each, and the documentation. Cacheable for five minutes.',
        response: { 200: Metadata, 429: Type.Ref('RateLimited') },
        doc: {
          operationId: 'getAuthorizationServerMetadata',
          returns: 'The authorization server metadata',
          response: {
            issuer: 'https://auth.example.com',
            introspection_endpoint: 'https://auth.example.com/oauth2/introspect',
            introspection_endpoint_auth_methods_supported: ['Bearer'],
            revocation_endpoint: 'https://auth.example.com/oauth2/revoke',
            revocation_endpoint_auth_methods_supported: ['none'],
            response_types_supported: [],
            service_documentation: 'https://auth.example.com/docs',
          },
        },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=300')
      return metadata
    },
  )
}
