/**
 * What the OpenAPI document says about the operations tagged `tokens` beyond their route schemas:
 * `/tokens/verify` (this folder) and `/tokens/offline` (src/offline/, under the same tag), and the
 * description of the `offline` tag of src/edge/'s routes, which give their operationIds themselves.
 */

import { ACCESS, MFA_REQUIRED, OFFLINE_EXPIRES_AT, OFFLINE_TOKEN } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const TOKENS_OPENAPI: FeatureOpenApi = {
  tags: {
    tokens: 'Token checks and offline tokens',
    // src/edge/'s routes (the edge key set, the scanner sync feed).
    offline: 'Offline scanning at the gate: the edge key set and the scanner sync feed',
  },
  operations: {
    'POST /tokens/verify': {
      operationId: 'verifyToken',
      returns: 'Whether the token is valid, and its claims when it is',
      request: { token: ACCESS },
      response: { valid: true, claims: { sub: '1', role: 'admin', exp: 1782901800 } },
    },
    'POST /tokens/offline': {
      operationId: 'createOfflineToken',
      request: { event_id: 1, device_id: 'gate-north-3' },
      returns: 'The offline token',
      response: { offline_token: OFFLINE_TOKEN, expires_at: OFFLINE_EXPIRES_AT, event_id: 1 },
      errors: MFA_REQUIRED,
    },
  },
}
