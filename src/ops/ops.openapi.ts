/** What the OpenAPI document says about the ops operations beyond their route schemas. */
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const OPS_OPENAPI: FeatureOpenApi = {
  operations: {
    'GET /': {
      operationId: 'getIndex',
      returns: 'Where to go from here',
      response: {
        service: 'wristband',
        version: '0.3.0',
        links: {
          docs: '/docs',
          openapi: '/openapi.json',
          dashboard: '/dashboard',
          health: '/health',
          ready: '/ready',
        },
      },
    },
    'GET /ready': {
      operationId: 'getReadiness',
      returns: 'The database (and Redis, when configured) answer',
      response: {
        status: 'ready',
        checks: {
          database: { status: 'up', dialect: 'postgres' },
          data_dir: { status: 'up' },
          redis: { status: 'up' },
        },
      },
    },
  },
}
