/**
 * The health feature's OpenAPI texts that are no one route's: its tags' descriptions. Each route's own
 * texts (operationId, what it answers, examples, `error` codes) are in its schema's `doc`.
 */
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const HEALTH_OPENAPI: FeatureOpenApi = {
  tags: {
    health: 'Liveness and readiness probes',
  },
}
