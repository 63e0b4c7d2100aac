/** What the OpenAPI document says about the password-reset operations beyond their route schemas. */
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const PASSWORD_RESET_OPENAPI: FeatureOpenApi = {
  tags: {
    'password-reset': 'Administrator password reset',
  },
  operations: {
    'POST /admin/password-reset/email-send': {
      operationId: 'sendPasswordResetEmail',
      request: { email: 'admin@example.com' },
      returns: 'Accepted; a link is sent when the address is an administrator (the answer does not tell)',
      response: { message: 'If the address belongs to an administrator, a reset link is on its way' },
    },
    'POST /admin/password-reset/{token}': {
      operationId: 'resetPassword',
      request: { new_password: 'correct horse battery staple' },
      returns: 'The password is changed',
      response: { message: 'Password changed' },
    },
    'GET /admin/password-reset/{token}': {
      operationId: 'getPasswordResetPage',
      returns: 'The HTML page of the reset link',
    },
  },
}
