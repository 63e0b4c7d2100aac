/**
 * The mfa feature's OpenAPI texts that are no one route's: its tags' descriptions and the example values and
 * error cases its routes share. Each route's own texts (operationId, what it answers, examples, `error`
 * codes) are in its schema's `doc`.
 */

import { tokenPair } from '../platform/openapi-examples.js'
import type { ErrorCase, FeatureOpenApi } from '../platform/openapi-operations.js'

export const mfaTokenPair = {
  ...tokenPair,
  access_token:
    'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIiwicm9sZSI6ImFkbWluIiwibWZhX3ZlcmlmaWVkX2F0IjoxNzgyODk4MjAwfQ.c2lnbmF0dXJlLW1mYQ',
}

export const PASSKEY_REQUIRED: ErrorCase = {
  code: 'passkey_required',
  when: 'PASSKEYS_REQUIRED_FOR covers the administrator, who has a passkey: sign in with it at /auth/passkey',
  detail: 'PASSKEYS_REQUIRED_FOR: this account signs in with its passkey, not with a TOTP code',
}

export const MFA_OPENAPI: FeatureOpenApi = {
  tags: {
    mfa: 'Multi-factor authentication (TOTP)',
  },
}
