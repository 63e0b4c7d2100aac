/**
 * The api-keys feature's OpenAPI texts that are no one route's: its tags' descriptions and the example
 * values and error cases its routes share. Each route's own texts (operationId, what it answers, examples,
 * `error` codes) are in its schema's `doc`.
 */

import { AT } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const apiKeyView = {
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
}
