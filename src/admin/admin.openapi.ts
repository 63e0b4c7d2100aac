/**
 * The admin feature's OpenAPI texts that are no one route's: its tags' descriptions. Each route's own texts
 * (operationId, what it answers, examples, `error` codes) are in its schema's `doc`.
 */
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const ADMIN_OPENAPI: FeatureOpenApi = {
  tags: {
    admin: 'The signed-in administrator',
  },
}
