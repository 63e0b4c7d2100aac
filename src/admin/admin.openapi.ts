/** What the OpenAPI document says about the admin operations beyond their route schemas. */
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const ADMIN_OPENAPI: FeatureOpenApi = {
  tags: {
    admin: 'The signed-in administrator',
  },
  operations: {
    'GET /admin/me': {
      operationId: 'getCurrentAdmin',
      returns: 'The signed-in account',
      response: {
        id: 1,
        email: 'admin@example.com',
        role: 'admin',
        event_ids: [1],
        is_two_factor_authentication_enabled: true,
        created_at: '2026-03-02T08:00:00.000Z',
      },
    },
  },
}
