/** What the OpenAPI document says about the mfa operations beyond their route schemas. */

import { MFA_REQUIRED, tokenPair } from '../platform/openapi-examples.js'
import type { ErrorCase, FeatureOpenApi } from '../platform/openapi-operations.js'

const mfaTokenPair = {
  ...tokenPair,
  access_token:
    'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIiwicm9sZSI6ImFkbWluIiwibWZhX3ZlcmlmaWVkX2F0IjoxNzgyODk4MjAwfQ.c2lnbmF0dXJlLW1mYQ',
}

const PASSKEY_REQUIRED: ErrorCase = {
  code: 'passkey_required',
  when: 'PASSKEYS_REQUIRED_FOR covers the administrator, who has a passkey: sign in with it at /auth/passkey',
  detail: 'PASSKEYS_REQUIRED_FOR: this account signs in with its passkey, not with a TOTP code',
}

export const MFA_OPENAPI: FeatureOpenApi = {
  tags: {
    mfa: 'Multi-factor authentication (TOTP)',
  },
  operations: {
    'POST /admin/mfa/setup': {
      operationId: 'startMfaEnrolment',
      returns: 'The new TOTP secret and its URI',
      response: {
        secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP',
        qr_uri:
          'otpauth://totp/wristband:admin%40example.com?issuer=wristband&secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&algorithm=SHA1&digits=6&period=30',
      },
      errors: MFA_REQUIRED,
    },
    'POST /admin/mfa/verify': {
      operationId: 'verifyMfaCode',
      request: { code: '492039' },
      returns: 'MFA is on; tokens carrying mfa_verified_at',
      response: mfaTokenPair,
      errors: { 403: [PASSKEY_REQUIRED] },
    },
    'GET /admin/sensitive/ping': {
      operationId: 'pingSensitive',
      returns: 'The MFA verification is fresh',
      response: { status: 'ok' },
      errors: {
        403: [
          {
            code: 'require_mfa',
            when: '`reason` is `mfa_never` or `mfa_stale`: verify a TOTP code first',
            detail: 'MFA verification is too old; verify again',
            extra: { reason: 'mfa_stale' },
          },
        ],
      },
    },
  },
}
