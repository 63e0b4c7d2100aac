import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { LevelWithSilent } from 'pino'
import { type Static, Type } from 'typebox'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import type { TokenService } from './token.service.js'
import type { VerifyAnswers } from './verify-answer.js'

export const TokenVerifyRequest = Type.Object(
  { token: Type.String({ maxLength: 8192 }) },
  { additionalProperties: false },
)

export const TokenVerifyResponse = Type.Object({
  valid: Type.Boolean(),
  claims: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()], {
    description: 'The token claims when valid, else null',
  }),
})

const JSON_TYPE = 'application/json; charset=utf-8'

export interface TokenVerifyRoutesDeps {
  tokens: TokenService
  /** The answers' JSON text, shared with the verify lane. */
  answers: VerifyAnswers
  /** The service's LOG_LEVEL. */
  logLevel: LevelWithSilent
}

export const tokenVerifyRoutes: FastifyPluginAsyncTypebox<TokenVerifyRoutesDeps> = async (
  app,
  { tokens, answers, logLevel },
) => {
  app.post(
    '/tokens/verify',
    {
      config: perMinute(600),
      // Every backend calls this on each uncached request: at the default level (info) it writes no
      // request lines (warnings and errors still log, with the request id); debug and trace keep them.
      logLevel: logLevel === 'info' ? 'warn' : logLevel,
      schema: {
        tags: ['tokens'],
        summary: 'Check any credential the service issued; the single authority on token validity',
        description:
          'Answers 200 `{valid: true, claims}` for a good token and `{valid: false, claims: null}` for any bad one ' +
          '(bad signature, wrong aud/iss, expired, revoked, unknown). Callers may cache a valid answer for 60 s.',
        body: TokenVerifyRequest,
        response: { 200: TokenVerifyResponse, ...errorResponses() },
      },
    },
    // The answer's JSON text is built by `answers` (the schema above describes it): a valid answer's
    // text is made once per token, and most calls answer without a promise. Fastify sends a string
    // with a JSON content type as it is; the cast only tells the type provider so.
    (request, reply) => {
      reply.type(JSON_TYPE)
      const claims = tokens.introspect(request.body.token)
      const text = claims instanceof Promise ? claims.then(answers) : answers(claims)
      return text as unknown as Static<typeof TokenVerifyResponse>
    },
  )
}
