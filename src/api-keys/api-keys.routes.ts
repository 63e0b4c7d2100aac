import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { ProtectCredentials } from '../mfa/fresh-mfa.js'
import { MFA_REQUIRED } from '../platform/openapi-examples.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses, Message } from '../platform/schemas.js'
import { claimsOf, protect } from '../tokens/guard.js'
import { apiKeyCredential, VERIFY_SCOPE } from './api-key.credential.js'
import type { ApiKeyCache } from './api-key-cache.js'
import { apiKeyView } from './api-keys.openapi.js'
import { ApiKeyService, type ApiKeyServiceDeps } from './api-keys.service.js'
import { API_KEY_PREFIX } from './api-keys.store.js'

const ApiScope = Type.Union([Type.Literal('api:read'), Type.Literal('api:write'), Type.Literal(VERIFY_SCOPE)])

export const APIKeyRequest = Type.Object(
  {
    event_id: Type.Integer(),
    name: Type.String({ minLength: 1, maxLength: 100 }),
    scopes: Type.Array(ApiScope, { minItems: 1, uniqueItems: true }),
    partner: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description:
          "The ticket partner the key belongs to. A partner's keys share its transfers, receiver and deliveries " +
          '(name the same partner to rotate a key); partners never see each other. Default: a partner of its own.',
      }),
    ),
  },
  { additionalProperties: false },
)

export const APIKeyResponse = Type.Object({
  id: Type.Integer({ description: 'The key_id that DELETE /tokens/api-key/{key_id} takes' }),
  api_key: Type.String({ description: 'wb_… plaintext, shown only in this answer' }),
  name: Type.String(),
  event_id: Type.Integer(),
  partner: Type.String({ description: 'The partner the key belongs to' }),
  scopes: Type.Array(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
})

export const APIKeyListItem = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  prefix: Type.String({ description: 'First characters of the key, to tell keys apart' }),
  event_id: Type.Integer(),
  partner: Type.String({ description: 'The partner the key belongs to' }),
  scopes: Type.Array(Type.String()),
  created_at: Type.String({ format: 'date-time' }),
  last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  revoked_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
})

export interface ApiKeyRoutesDeps extends ApiKeyServiceDeps {
  protectCredentials: ProtectCredentials
  /** This instance's one cache of API keys. */
  apiKeys: ApiKeyCache
}

export const apiKeyRoutes: FastifyPluginAsyncTypebox<ApiKeyRoutesDeps> = async (app, deps) => {
  // API keys are credentials of the token guard (the partner API, and verify credentials).
  const apiKeys = new ApiKeyService(deps)
  deps.tokens.registerCredential(API_KEY_PREFIX, apiKeyCredential(deps.apiKeys, deps.clock), (key) =>
    apiKeys.revokePresented(key),
  )
  const adminOnly = protect(deps.tokens, { roles: ['admin'] })

  app.post(
    '/tokens/api-key',
    {
      config: perMinute(10),
      ...deps.protectCredentials({ roles: ['admin'] }),
      schema: {
        tags: ['api-keys'],
        summary: 'Create an API key for an event (role event_client); the plaintext is shown once',
        description:
          'For administrators of the event. `scopes` is a non-empty subset of api:read, api:write (the partner ' +
          'API) and tokens:verify (a verify credential: a backend sends it as `api_key` with POST /tokens/verify ' +
          'and is limited per key instead of per address). Only the ' +
          "key's SHA-256 is stored; the `wb_…` plaintext exists only in this answer. The key never expires: " +
          "while the administrator's MFA is enabled, the access token needs a fresh `mfa_verified_at` " +
          '(403 `{"detail", "error": "mfa_required"}` otherwise).',
        security: [{ OAuth2PasswordBearer: [] }],
        body: APIKeyRequest,
        response: { 200: APIKeyResponse, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'createApiKey',
          request: {
            event_id: 1,
            name: 'Acme box office 2026',
            scopes: ['api:read', 'api:write'],
            partner: 'Acme Tickets',
          },
          returns: 'The new key; its plaintext is shown only here',
          response: { ...apiKeyView, api_key: 'wb_Xk9mQ2vL7pR4tW1nB8cF3hJ6sD0gY5eA2uK7oZ4iM9q' },
          errors: MFA_REQUIRED,
        },
      },
    },
    async (request) => apiKeys.create(claimsOf(request), request.body, request.ip),
  )

  app.delete(
    '/tokens/api-key/:key_id',
    {
      config: perMinute(30),
      ...adminOnly,
      schema: {
        tags: ['api-keys'],
        summary: 'Revoke an API key; POST /tokens/verify calls it invalid at once',
        description: 'Revoking a key that is already revoked answers 200 again.',
        security: [{ OAuth2PasswordBearer: [] }],
        params: Type.Object({ key_id: Type.Integer() }),
        response: { 200: Message, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'revokeApiKey',
          returns: 'The key is revoked',
          response: { message: 'API key revoked' },
        },
      },
    },
    async (request) => {
      await apiKeys.revoke(claimsOf(request), request.params.key_id, request.ip)
      return { message: 'API key revoked' }
    },
  )

  app.get(
    '/tokens/api-keys',
    {
      config: perMinute(30),
      ...adminOnly,
      schema: {
        tags: ['api-keys'],
        summary: "An event's API keys, revoked ones included, without secrets",
        security: [{ OAuth2PasswordBearer: [] }],
        querystring: Type.Object({ event_id: Type.Integer() }),
        response: { 200: Type.Array(APIKeyListItem), ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'listApiKeys',
          returns: "The event's keys, without secrets",
          response: [
            {
              ...apiKeyView,
              prefix: 'wb_Xk9mQ2v',
              last_used_at: '2026-07-18T20:14:03.000Z',
              revoked_at: null,
            },
          ],
        },
      },
    },
    async (request) => apiKeys.list(claimsOf(request), request.query.event_id),
  )
}
