import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { LevelWithSilent } from 'pino'
import { Type } from 'typebox'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import type { TokenService } from './token.service.js'

export const TokenVerifyRequest = Type.Object(
  { token: Type.String({ maxLength: 8192 }) },
  { additionalProperties: false },
)

export const TokenVerifyResponse = Type.Object({
  valid: Type.Boolean(),
  // Declared without a union: fast-json-stringify would otherwise run a schema check per answer to
  // pick the branch. The claims are the service's own object (or null) and go out as they are.
  claims: Type.Unsafe<Record<string, unknown> | null>({
    description: 'The token claims (an object) when valid, else null',
  }),
})

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
    (request) => tokens.introspect(request.body.token),
  )
}
