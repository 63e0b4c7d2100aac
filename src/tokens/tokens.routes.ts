import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { LevelWithSilent } from 'pino'
import { type Static, Type } from 'typebox'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import type { TokenService } from './token.service.js'

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
  /** The service's LOG_LEVEL. */
  logLevel: LevelWithSilent
}

export const tokenVerifyRoutes: FastifyPluginAsyncTypebox<TokenVerifyRoutesDeps> = async (
  app,
  { tokens, logLevel },
) => {
  app.post(
    '/tokens/verify',
    {
      // With Redis the count goes in the same script call as the revocation look-up.
      config: perMinute(600, { countedByRoute: true }),
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
    // The service builds the answer's JSON text itself (the schema above describes it): a valid
    // answer's text is made once per token, and most calls answer without a promise. Fastify sends a
    // string with a JSON content type as it is; the cast only tells the type provider so.
    (request, reply) => {
      reply.type(JSON_TYPE)
      return tokens.introspect(request.body.token, request.deferredLimit) as unknown as Static<
        typeof TokenVerifyResponse
      >
    },
  )
}
