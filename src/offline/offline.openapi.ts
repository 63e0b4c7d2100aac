/** What the OpenAPI document says about `POST /tokens/offline` beyond its route schema (tag `tokens`). */
import { MFA_REQUIRED, OFFLINE_EXPIRES_AT, OFFLINE_TOKEN } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const OFFLINE_OPENAPI: FeatureOpenApi = {
  operations: {
    'POST /tokens/offline': {
      operationId: 'createOfflineToken',
      request: { event_id: 1, device_id: '3' },
      returns: 'The offline token',
      response: { offline_token: OFFLINE_TOKEN, expires_at: OFFLINE_EXPIRES_AT, event_id: 1 },
      errors: MFA_REQUIRED,
    },
  },
}
