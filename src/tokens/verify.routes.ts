import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { LevelWithSilent } from 'pino'
import { type Static, Type } from 'typebox'
import { ACCESS } from '../platform/openapi-examples.js'
import { errorResponses } from '../platform/schemas.js'
import { securityHeaders } from '../platform/security-headers.js'
import { acceptingNul } from '../platform/validation.js'
import type { TokenService } from './token.service.js'
import type { VerifyAnswers } from './verify-answer.js'
import { apiKeyOf, limitVerifyCallers, type VerifyCallers } from './verify-callers.js'

/**
 * POST /tokens/verify, defined once: the route below and the verify lane (verify-lane.ts), which
 * answers canonical requests before Fastify, take the path, the method, the limits, the answer's
 * headers and the log policy from here, so a change to one is a change to both.
 */
export const VERIFY_METHOD = 'POST'
export const VERIFY_URL = '/tokens/verify'

export interface VerifyLimits {
  /** Longest token (JSON Schema `maxLength`). */
  maxToken: number
  /** Longest `api_key`. */
  maxApiKey: number
  /** Requests per address per minute of callers without a verify credential (the specification's 600). */
  anonymousPerMinute: number
}

export const VERIFY_LIMITS: Readonly<VerifyLimits> = Object.freeze({
  maxToken: 8192,
  maxApiKey: 256,
  anonymousPerMinute: 600,
})

/**
 * The body's strings may hold U+0000 (the rule every other route has, platform/validation.ts): a
 * token or key with one is simply not a valid one, as the verify lane answers; neither reaches the
 * database as it is (a key is looked up by its digest).
 */
function verifyRequestSchema(limits: VerifyLimits) {
  return acceptingNul(
    Type.Object(
      {
        token: Type.String({ maxLength: limits.maxToken }),
        api_key: Type.Optional(
          Type.String({
            minLength: 1,
            maxLength: limits.maxApiKey,
            description:
              'A verify credential (an API key with scope `tokens:verify`): the request counts against its own ' +
              "limit (VERIFY_CLIENT_RATE_LIMIT a minute) instead of the address's 600. A key that is not a live " +
              'verify credential counts as none',
          }),
        ),
      },
      { additionalProperties: false },
    ),
  )
}

export const TokenVerifyResponse = Type.Object({
  valid: Type.Boolean(),
  claims: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()], {
    description: 'The token claims when valid, else null',
  }),
})

/**
 * Every backend calls this on each uncached request: at the default level (info) the route writes no
 * request lines (warnings and errors still log, with the request id); debug and trace keep them, and
 * the lane, which writes none, is off there.
 */
export function verifyLogLevel(logLevel: LevelWithSilent): LevelWithSilent {
  return logLevel === 'info' ? 'warn' : logLevel
}

export function laneAllowedAt(logLevel: LevelWithSilent): boolean {
  return logLevel !== 'debug' && logLevel !== 'trace'
}

/**
 * The headers of every verify answer besides the rate-limit ones, as name, value, name, value…: the
 * answer's type, no-store and the security headers of JSON answers. The route sets them on its
 * reply, the lane writes them; computed once per instance.
 */
export function verifyAnswerHeaders(): string[] {
  const headers = ['content-type', 'application/json; charset=utf-8', 'cache-control', 'no-store']
  for (const [name, value] of Object.entries(securityHeaders().api)) headers.push(name, value)
  return headers
}

export interface TokenVerifyRoutesDeps {
  tokens: TokenService
  /** The answers' JSON text, shared with the verify lane. */
  answers: VerifyAnswers
  /** The budgets of the callers, shared with the verify lane. */
  callers: VerifyCallers
  /** The service's LOG_LEVEL. */
  logLevel: LevelWithSilent
  limits?: VerifyLimits
}

export const tokenVerifyRoutes: FastifyPluginAsyncTypebox<TokenVerifyRoutesDeps> = async (app, deps) => {
  const { tokens, answers, callers, logLevel } = deps
  const limits = deps.limits ?? VERIFY_LIMITS
  const pairs = verifyAnswerHeaders()
  const headers: Record<string, string> = {}
  for (let i = 0; i < pairs.length; i += 2) headers[pairs[i]!] = pairs[i + 1]!
  app.route({
    method: VERIFY_METHOD,
    url: VERIFY_URL,
    logLevel: verifyLogLevel(logLevel),
    // Counted once the body is read: a caller with a verify credential has a budget of its own.
    preValidation: limitVerifyCallers(callers, (request) => apiKeyOf(request.body, limits.maxApiKey)),
    schema: {
      tags: ['tokens'],
      summary: 'Check any credential the service issued; the single authority on token validity',
      description:
        'Answers 200 `{valid: true, claims}` for a good token and `{valid: false, claims: null}` for any bad one ' +
        '(bad signature, wrong aud/iss, expired, revoked, unknown). Callers may cache an answer, valid or ' +
        'not, for 60 s. A backend that verifies for its users sends its verify credential as `api_key` and ' +
        'is limited per credential (VERIFY_CLIENT_RATE_LIMIT a minute, default 60,000); without one, ' +
        '600 a minute per address.',
      body: verifyRequestSchema(limits),
      response: { 200: TokenVerifyResponse, ...errorResponses() },
      doc: {
        operationId: 'verifyToken',
        returns: 'Whether the token is valid, and its claims when it is',
        request: { token: ACCESS },
        response: { valid: true, claims: { sub: '1', role: 'admin', exp: 1782901800 } },
      },
    },
    // The answer's JSON text is built by `answers` (the schema above describes it): a valid answer's
    // text is made once per token, and most calls answer without a promise. Fastify sends a string
    // with a JSON content type as it is; the cast only tells the type provider so.
    handler: (request, reply) => {
      reply.headers(headers)
      const claims = tokens.introspect(request.body.token)
      const text = claims instanceof Promise ? claims.then(answers) : answers(claims)
      return text as unknown as Static<typeof TokenVerifyResponse>
    },
  })
}
