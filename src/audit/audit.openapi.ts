/** What the OpenAPI document says about the audit operations beyond their route schemas. */
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const AUDIT_OPENAPI: FeatureOpenApi = {
  tags: {
    audit: 'Security events',
  },
  operations: {
    'GET /admin/audit': {
      operationId: 'listAuditEvents',
      returns: 'A page of security events',
      response: {
        items: [
          {
            id: 918,
            at: '2026-07-18T20:14:03.000Z',
            kind: 'api_key_created',
            actor: 'admin:1',
            ip: '203.0.113.7',
            outcome: 'success',
            detail: {
              key_id: 5,
              event_id: 1,
              name: 'Acme box office 2026',
              scopes: ['api:read', 'api:write'],
              partner: 'Acme Tickets',
            },
          },
          {
            id: 917,
            at: '2026-07-18T20:12:41.000Z',
            kind: 'login',
            actor: 'admin:1',
            ip: '203.0.113.7',
            outcome: 'success',
            detail: null,
          },
        ],
        next_before: 917,
        next_after: null,
      },
    },
  },
}
