import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { LevelWithSilent } from 'pino'
import { Type } from 'typebox'
import { isDependencyFailure } from '../platform/error-handler.js'
import { ValidationFailed } from '../platform/errors.js'
import { errorResponses } from '../platform/schemas.js'
import {
  authenticate,
  type CheckAnswers,
  judge,
  REQUIRE_HEADER,
  REQUIREMENT_FORMS,
  REQUIREMENT_NAMES,
  type RequirementName,
  type RequirementValues,
  refusalError,
  requirementsOf,
} from './check.js'
import type { TokenService } from './token.service.js'
import { VERIFY_LIMITS, type VerifyLimits, verifyLogLevel } from './verify.routes.js'
import { limitVerifyCallers, type VerifyCallers } from './verify-callers.js'

/**
 * GET /tokens/check, defined once: the route below and the verify lane (check-lane.ts), which answers
 * the same requests before Fastify, take the path, the methods and the forms of the requirements from
 * here and from check.ts. Gateways ask with any of CHECK_METHODS (Envoy keeps the original request's)
 * at CHECK_URL or at any path under it (Envoy appends the original path: there the query is the
 * original request's, so requirements come from headers only).
 */
export const CHECK_URL = '/tokens/check'
export const CHECK_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const
/** The route label (metrics, logs) of a check at a path under CHECK_URL. */
export const CHECK_SUFFIX_URL = `${CHECK_URL}/*`

const requirementText: Record<RequirementName, string> = {
  role: 'Roles allowed, comma-separated (`admin,operator`)',
  type: 'Token types allowed, comma-separated; default `access` only, so a refresh token never passes',
  event: 'The id of an event the token must reach (a grant for it, or for every event)',
  scope: 'Scopes the token must hold, comma-separated: at `event` when given, else for every event',
}

const requirementSchema = (name: RequirementName, where?: string) => {
  const description = where ? `${requirementText[name]} ${where}` : requirementText[name]
  return name === 'event'
    ? Type.Integer({ minimum: 1, description })
    : Type.String({ ...REQUIREMENT_FORMS[name], description })
}

const CheckQuery = Type.Object(
  {
    role: Type.Optional(requirementSchema('role')),
    type: Type.Optional(requirementSchema('type')),
    event: Type.Optional(requirementSchema('event')),
    scope: Type.Optional(requirementSchema('scope')),
  },
  // A misspelt requirement must not read as none: an unknown parameter is 422.
  { additionalProperties: false },
)

const asHeader = '(as a header, for gateways that cannot set a query, e.g. Envoy)'
const CheckHeaders = Type.Object({
  'wristband-require-role': Type.Optional(requirementSchema('role', asHeader)),
  'wristband-require-type': Type.Optional(requirementSchema('type', asHeader)),
  'wristband-require-event': Type.Optional(requirementSchema('event', asHeader)),
  'wristband-require-scope': Type.Optional(requirementSchema('scope', asHeader)),
  api_key: Type.Optional(
    Type.String({
      description:
        "The gateway's verify credential (an API key with scope `tokens:verify`): its checks count against " +
        "the credential's limit (VERIFY_CLIENT_RATE_LIMIT a minute, shared with POST /tokens/verify) instead " +
        "of the address's 600. A key that is not a live verify credential counts as none",
    }),
  ),
})

const claimHeader = (description: string) => ({ type: 'string', description })

/** The 200: no body, the claims as headers. */
const Allowed = {
  type: 'null',
  description: 'Allowed',
  headers: {
    'X-Auth-Subject': claimHeader("The token's subject (`sub`)"),
    'X-Auth-Role': claimHeader("The token's role"),
    'X-Auth-Token-Type': claimHeader("The token's type (`access` unless the check allows others)"),
    'X-Auth-Expires': claimHeader("The token's expiry, seconds since the epoch (`exp`)"),
    'X-Auth-Event-Ids': claimHeader("The token's `event_ids`, comma-separated; absent when it names none"),
    'X-Auth-Claims': claimHeader('Every claim of the token: its JSON, base64url-encoded without padding'),
    'Cache-Control': claimHeader(
      '`no-store`; with CHECK_CACHE_SECONDS set, `max-age` of at most that many seconds and never past the token expiry',
    ),
  },
}

export interface TokenCheckRoutesDeps {
  tokens: TokenService
  /** The answers' headers and refusals, shared with the verify lane. */
  checks: CheckAnswers
  /** The budgets of the callers: POST /tokens/verify's, shared with it and the verify lane. */
  callers: VerifyCallers
  /** The service's LOG_LEVEL. */
  logLevel: LevelWithSilent
  limits?: VerifyLimits
}

/** The gateway's verify credential: the `api_key` header, when it has the length of one. */
function apiKeyHeader(maxApiKey: number) {
  return (request: FastifyRequest): string | undefined => {
    const key = request.headers.api_key
    return typeof key === 'string' && key.length > 0 && key.length <= maxApiKey ? key : undefined
  }
}

/** The requirements a request's headers name; a `Wristband-Require-*` header the check does not know is 422. */
export function requirementHeaders(headers: Record<string, unknown>): RequirementValues {
  for (const name in headers)
    if (
      name.startsWith(REQUIRE_HEADER) &&
      !(REQUIREMENT_NAMES as readonly string[]).includes(name.slice(REQUIRE_HEADER.length))
    )
      throw new ValidationFailed([
        { loc: ['header', name], msg: 'Unknown requirement', type: 'extra_forbidden', input: headers[name] },
      ])
  return {
    role: headers['wristband-require-role'] as string | undefined,
    type: headers['wristband-require-type'] as string | undefined,
    event: headers['wristband-require-event'] as number | undefined,
    scope: headers['wristband-require-scope'] as string | undefined,
  }
}

export const tokenCheckRoutes: FastifyPluginAsyncTypebox<TokenCheckRoutesDeps> = async (app, deps) => {
  const { tokens, checks, callers, logLevel } = deps
  const limits = deps.limits ?? VERIFY_LIMITS
  // The body is ignored, whatever it is: no parser reads it (a gateway may forward the original
  // request's; node:http discards what is left once the answer is sent).
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', (_request, _payload, done) => done(null))

  // 429, then 401 (or 503 when the token service cannot decide): before the requirements are validated.
  async function authenticateHook(request: FastifyRequest) {
    let outcome: Awaited<ReturnType<typeof authenticate>>
    try {
      outcome = await authenticate(tokens, request.headers.authorization, limits.maxToken)
    } catch (err) {
      // A database that does not answer is the error handler's 503 (logged with its cause); anything
      // else that kept the token service from deciding is a 503 too: a gateway must never let it pass.
      if (isDependencyFailure(err)) throw err
      request.log.error({ err }, 'token check could not decide')
      throw refusalError('undecided')
    }
    if (typeof outcome === 'string') throw refusalError(outcome)
    request.auth = outcome
  }

  const answer = (withQuery: boolean) => (request: FastifyRequest, reply: FastifyReply) => {
    const fromHeaders = requirementHeaders(request.headers)
    const required = withQuery
      ? requirementsOf(request.query as RequirementValues, fromHeaders)
      : requirementsOf(fromHeaders)
    const claims = request.auth!
    const refusal = judge(claims, required)
    if (refusal !== null) throw refusalError(refusal)
    const headers = checks.allowed(claims)
    for (let i = 0; i < headers.length; i += 2) reply.header(headers[i]!, headers[i + 1])
    return reply.send()
  }

  const common = {
    logLevel: verifyLogLevel(logLevel),
    // Asked by gateways, never by a browser: no CORS answer (a preflight's 204 would read as "allowed").
    config: { cors: false as const },
    // The credential is a header: counted before anything else, under the verify callers' budgets.
    preValidation: [limitVerifyCallers(callers, apiKeyHeader(limits.maxApiKey)), authenticateHook],
  }
  const responses = { 200: Allowed, ...errorResponses(401, 403, 503) }

  app.route({
    ...common,
    method: 'GET',
    url: CHECK_URL,
    schema: {
      tags: ['tokens'],
      summary: 'For gateways: may the request that carries this bearer token pass?',
      description:
        'The form nginx `auth_request`, Caddy `forward_auth`, Traefik `forwardAuth` and Envoy `ext_authz` read: ' +
        '**200** allows the request and carries the claims as headers; **401** (`WWW-Authenticate: Bearer`, ' +
        'with `error="invalid_token"` when a token was given) refuses a missing, malformed, expired, revoked or ' +
        'unknown token, or one of a type not allowed; **403** (`error="insufficient_scope"`) a good token that ' +
        'does not meet the requirement; **503** when this instance cannot decide. Never 200 for a bad token. ' +
        'The token is the `Authorization: Bearer` of the original request; the body is ignored. Every method ' +
        `(${CHECK_METHODS.join(', ')}) answers the same, and so does any path under /tokens/check (for gateways ` +
        'that append the original path; there the query is ignored and requirements come from headers). ' +
        'Whatever POST /tokens/verify refuses, this refuses; a revocation reaches it within a second. ' +
        'See docs/gateways.md.',
      security: [{ OAuth2PasswordBearer: [] }],
      querystring: CheckQuery,
      headers: CheckHeaders,
      response: responses,
      doc: {
        operationId: 'checkToken',
        returns:
          'Allowed: the token is good and meets the requirements. No body; the claims are in the `X-Auth-*` headers ' +
          'for the gateway to pass on to the backend',
        errors: {
          401: [
            {
              code: 'invalid_token',
              when: 'a token was given and is not good, or is of a type the check does not allow (a refresh token by default); without a token: 401 without a code',
              detail: 'Could not validate credentials',
            },
          ],
          403: [
            {
              code: 'insufficient_scope',
              when: 'the token is good but lacks the role, event or scope the check requires',
              detail: 'The token does not meet the requirement',
            },
          ],
        },
      },
    },
    handler: answer(true),
  })
  // The other methods, and the paths under /tokens/check: the same answers, left out of the document.
  app.route({
    ...common,
    method: CHECK_METHODS.filter((m) => m !== 'GET' && m !== 'HEAD'),
    url: CHECK_URL,
    schema: { hide: true, querystring: CheckQuery, headers: CheckHeaders, response: responses },
    handler: answer(true),
  })
  app.route({
    ...common,
    method: CHECK_METHODS.filter((m) => m !== 'HEAD'),
    url: CHECK_SUFFIX_URL,
    schema: { hide: true, headers: CheckHeaders, response: responses },
    handler: answer(false),
  })
}
