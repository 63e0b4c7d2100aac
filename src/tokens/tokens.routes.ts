import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
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
  claims: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
})

export const tokenVerifyRoutes: FastifyPluginAsyncTypebox<{ tokens: TokenService }> = async (
  app,
  { tokens },
) => {
  app.post(
    '/tokens/verify',
    {
      config: perMinute(600),
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
