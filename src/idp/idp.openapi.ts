/** What the OpenAPI document says about the idp operations beyond their route schemas. */

import { ACCESS, consumerTokenPair } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const IDP_OPENAPI: FeatureOpenApi = {
  operations: {
    'POST /auth/login/idp': {
      operationId: 'loginConsumerWithIdp',
      request: { id_token: ACCESS },
      returns: 'An access token and a refresh token for the consumer',
      response: consumerTokenPair,
    },
  },
}
