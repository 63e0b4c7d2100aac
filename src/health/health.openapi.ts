/** What the OpenAPI document says about the health operations beyond their route schemas. */
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const HEALTH_OPENAPI: FeatureOpenApi = {
  tags: {
    health: 'Liveness and readiness probes',
  },
  operations: {
    'GET /health': { operationId: 'getHealth', returns: 'The process is alive', response: { status: 'ok' } },
  },
}
