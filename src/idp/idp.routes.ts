import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { TokenResponse } from '../auth/auth.schemas.js'
import type { Config } from '../platform/config.js'
import { ACCESS, consumerTokenPair } from '../platform/openapi-examples.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { type IdpLoginDeps, loginWithIdp } from './idp.service.js'
import { IdpVerifier } from './idp.verifier.js'

export interface IdpRoutesDeps extends Omit<IdpLoginDeps, 'verifier'> {
  /** The external identity providers whose ID tokens sign consumers in, and how their keys are fetched. */
  config: Pick<Config, 'IDP_ISSUERS' | 'IDP_JWKS_COOLDOWN_SECONDS' | 'IDP_HTTP_TIMEOUT_SECONDS'>
}

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

export const idpRoutes: FastifyPluginAsyncTypebox<IdpRoutesDeps> = async (app, given) => {
  const { config, clock } = given
  const verifier = new IdpVerifier({
    issuers: config.IDP_ISSUERS,
    clock,
    cooldownMs: config.IDP_JWKS_COOLDOWN_SECONDS * 1000,
    timeoutMs: config.IDP_HTTP_TIMEOUT_SECONDS * 1000,
  })
  const deps: IdpLoginDeps = { ...given, verifier }
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
        doc: {
          operationId: 'loginConsumerWithIdp',
          request: { id_token: ACCESS },
          returns: 'An access token and a refresh token for the consumer',
          response: consumerTokenPair,
        },
      },
    },
    async (request) => {
      return loginWithIdp(deps, request.body.id_token, request.ip)
    },
  )
}
