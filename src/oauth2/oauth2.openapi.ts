/** What the OpenAPI document says about the standard endpoints (RFC 7662, RFC 7009, RFC 8414). */

import { ACCESS, REFRESH } from '../platform/openapi-examples.js'
import type { ErrorCase, FeatureOpenApi } from '../platform/openapi-operations.js'

const INVALID_REQUEST: ErrorCase[] = [
  {
    code: 'invalid_request',
    when: 'the `token` parameter is missing or empty, a parameter is repeated, or a value is not a string or too long (RFC 6749 section 5.2)',
    detail: 'The token parameter is missing',
    extra: { error_description: 'The token parameter is missing' },
  },
]

export const OAUTH2_OPENAPI: FeatureOpenApi = {
  tags: {
    oauth2:
      'The standard endpoints (RFC 7662 introspection, RFC 7009 revocation, RFC 8414 metadata) for OAuth libraries and gateways',
  },
  operations: {
    'POST /oauth2/introspect': {
      operationId: 'introspectToken',
      returns: 'Whether the token is active and, when it is, its claims',
      request: { token: ACCESS, token_type_hint: 'access_token' },
      response: {
        active: true,
        token_type: 'bearer',
        type: 'access',
        sub: '1',
        role: 'admin',
        jti: 'Vg3kX9pQ2mL7rT4wB1nC8f',
        iat: 1782900900,
        exp: 1782901800,
        iss: 'wristband',
        aud: 'wristband',
        event_ids: [1],
        permissions: { '1': ['events:manage', 'reports:read'] },
      },
      errors: {
        400: INVALID_REQUEST,
        401: [
          {
            code: 'invalid_token',
            when: 'the credential given is no live verify credential (none given: 401 without `error`)',
            detail: 'A verify credential (an API key with scope tokens:verify) is required',
          },
        ],
      },
    },
    'POST /oauth2/revoke': {
      operationId: 'revokeToken',
      returns: 'The token is ended, or was no good token (the answer does not tell which)',
      request: { token: REFRESH, token_type_hint: 'refresh_token' },
      response: {},
      errors: { 400: INVALID_REQUEST },
    },
    'GET /.well-known/oauth-authorization-server': {
      operationId: 'getAuthorizationServerMetadata',
      returns: 'The authorization server metadata',
      response: {
        issuer: 'https://auth.example.com',
        introspection_endpoint: 'https://auth.example.com/oauth2/introspect',
        introspection_endpoint_auth_methods_supported: ['Bearer'],
        revocation_endpoint: 'https://auth.example.com/oauth2/revoke',
        revocation_endpoint_auth_methods_supported: ['none'],
        response_types_supported: [],
        service_documentation: 'https://auth.example.com/docs',
      },
    },
  },
}
