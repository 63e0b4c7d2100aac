/** What the OpenAPI document says about the auth operations beyond their route schemas. */

import { REFRESH, tokenPair } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const AUTH_OPENAPI: FeatureOpenApi = {
  tags: {
    auth: 'Sign-in of administrators, operators and network managers; token refresh and sign-out',
  },
  operations: {
    'POST /auth/login': {
      operationId: 'login',
      returns: 'An access token and a refresh token',
      request: { email: 'admin@example.com', password: 'correct horse battery staple', role: 'admin' },
      response: tokenPair,
    },
    'POST /auth/refresh': {
      operationId: 'refreshTokens',
      returns: 'A new token pair; the refresh token sent is spent',
      request: { refresh_token: REFRESH },
      response: tokenPair,
    },
    'POST /auth/logout': {
      operationId: 'logout',
      returns: 'The session is ended',
      request: { refresh_token: REFRESH },
      response: { message: 'Logged out' },
    },
  },
}
