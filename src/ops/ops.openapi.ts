/** What the OpenAPI document says about the ops operations beyond their route schemas. */
import type { FeatureOpenApi } from '../platform/openapi-operations.js'
import { INDEX_LINKS } from './index.routes.js'

export const OPS_OPENAPI: FeatureOpenApi = {
  operations: {
    'GET /': {
      operationId: 'getIndex',
      returns: 'Where to go from here',
      response: { service: 'wristband', version: '0.3.0', links: INDEX_LINKS },
    },
    'GET /ready/verify': {
      operationId: 'getVerifyReadiness',
      returns: 'The instance can verify: its revocation list is complete without the database',
      response: {
        status: 'ready',
        checks: { revocations: { status: 'fresh', via: 'feed', last_read_seconds_ago: 0.4 } },
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
