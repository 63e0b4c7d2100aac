import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { TokenResponse } from '../auth/auth.schemas.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { type IdpLoginDeps, loginWithIdp } from './idp.service.js'

export const IdpLoginRequest = Type.Object(
  {
    id_token: Type.String({
      minLength: 1,
      maxLength: 16384,
      description: 'ID token minted by an identity provider listed in IDP_ISSUERS',
    }),
  },
  { additionalProperties: false },
)

export const idpRoutes: FastifyPluginAsyncTypebox<IdpLoginDeps> = async (app, deps) => {
  app.post(
    '/auth/login/idp',
    {
      config: perMinute(30),
      schema: {
        tags: ['consumers'],
        summary: 'Sign in a consumer with an identity-provider ID token',
        description:
          'The token must be signed (RS256 or ES256) by a key of its issuer, be addressed to the configured ' +
          'audience and be current. The consumer linked to the account is signed in; else one with the same ' +
          'provider-verified e-mail is linked; else a new consumer is created.',
        body: IdpLoginRequest,
        response: { 200: TokenResponse, ...errorResponses(401, 503) },
      },
    },
    async (request) => {
      return loginWithIdp(deps, request.body.id_token, request.ip)
    },
  )
}
