/**
 * The password-reset feature's OpenAPI texts that are no one route's: its tags' descriptions. Each route's
 * own texts (operationId, what it answers, examples, `error` codes) are in its schema's `doc`.
 */
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const PASSWORD_RESET_OPENAPI: FeatureOpenApi = {
  tags: {
    'password-reset': 'Administrator password reset',
  },
}
