/** What the OpenAPI document says about the health operations beyond their route schemas. */
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const HEALTH_OPENAPI: FeatureOpenApi = {
  tags: {
    health: 'Liveness and readiness probes',
  },
  operations: {
    'GET /live': {
      operationId: 'getLive',
      returns:
        'The process is alive: it answers. Neither the database nor Redis is asked, so an outage of either does not make an orchestrator restart the instance (GET /ready answers 503 instead)',
      response: { status: 'ok' },
    },
    'GET /health': {
      operationId: 'getHealth',
      returns: 'The process is alive (as GET /live)',
      response: { status: 'ok' },
    },
  },
}
