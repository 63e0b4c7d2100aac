/**
 * What the OpenAPI document says about `POST /tokens/verify` beyond its route schema, and the `tokens`
 * tag (which src/offline/'s `POST /tokens/offline` carries too).
 */

import { ACCESS } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const TOKENS_OPENAPI: FeatureOpenApi = {
  tags: {
    tokens: 'Token checks and offline tokens',
  },
  operations: {
    'POST /tokens/verify': {
      operationId: 'verifyToken',
      returns: 'Whether the token is valid, and its claims when it is',
      request: { token: ACCESS },
      response: { valid: true, claims: { sub: '1', role: 'admin', exp: 1782901800 } },
    },
  },
}
