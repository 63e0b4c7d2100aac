/**
 * What the OpenAPI document says about `POST /tokens/verify` and `GET /tokens/check` beyond their route
 * schemas, and the `tokens` tag (which src/offline/'s `POST /tokens/offline` carries too).
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
    'GET /tokens/check': {
      operationId: 'checkToken',
      returns:
        'Allowed: the token is good and meets the requirements. No body; the claims are in the `X-Auth-*` headers ' +
        'for the gateway to pass on to the backend',
      errors: {
        401: [
          {
            code: 'invalid_token',
            when: 'a token was given and is not good, or is of a type the check does not allow (a refresh token by default); without a token: 401 without a code',
            detail: 'Could not validate credentials',
          },
        ],
        403: [
          {
            code: 'insufficient_scope',
            when: 'the token is good but lacks the role, event or scope the check requires',
            detail: 'The token does not meet the requirement',
          },
        ],
      },
    },
  },
}
