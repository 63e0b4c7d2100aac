/** What the OpenAPI document says about the api-keys operations beyond their route schemas. */

import { AT, MFA_REQUIRED } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

const apiKeyView = {
  id: 5,
  name: 'Acme box office 2026',
  event_id: 1,
  partner: 'Acme Tickets',
  scopes: ['api:read', 'api:write'],
  created_at: AT,
}

export const API_KEYS_OPENAPI: FeatureOpenApi = {
  tags: {
    'api-keys': 'API keys of ticket partners',
  },
  operations: {
    'POST /tokens/api-key': {
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
    'DELETE /tokens/api-key/{key_id}': {
      operationId: 'revokeApiKey',
      returns: 'The key is revoked',
      response: { message: 'API key revoked' },
    },
    'GET /tokens/api-keys': {
      operationId: 'listApiKeys',
      returns: "The event's keys, without secrets",
      response: [
        { ...apiKeyView, prefix: 'wb_Xk9mQ2v', last_used_at: '2026-07-18T20:14:03.000Z', revoked_at: null },
      ],
    },
  },
}
