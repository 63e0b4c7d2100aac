/** What the OpenAPI document says about the passkeys operations beyond their route schemas. */

import { creationOptions, MFA_REQUIRED, requestOptions, tokenPair } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

const PASSKEY_FLOW = 'v3yJ0H8k2M1qQ7bL9xW4tZr6uA5sD0fG1hJ2kL3mN4o'

const CREDENTIAL_ID = 'AX1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v'

const registrationCredential = {
  id: CREDENTIAL_ID,
  rawId: CREDENTIAL_ID,
  type: 'public-key',
  response: {
    clientDataJSON:
      'eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIiwiY2hhbGxlbmdlIjoicThZYzJtMUt4MHY5Yk4zclQ2d0U1dUk0b1A3YVMxZEYyZ0gzaks0bFo1eCIsIm9yaWdpbiI6Imh0dHBzOi8vd3Jpc3RiYW5kLmV4YW1wbGUuY29tIiwiY3Jvc3NPcmlnaW4iOmZhbHNlfQ',
    attestationObject: 'o2NmbXRkbm9uZWdhdHRTdG10oGhhdXRoRGF0YVjF',
    transports: ['internal', 'hybrid'],
  },
  clientExtensionResults: { credProps: { rk: true } },
  authenticatorAttachment: 'platform',
}

const authenticationCredential = {
  id: CREDENTIAL_ID,
  rawId: CREDENTIAL_ID,
  type: 'public-key',
  response: {
    clientDataJSON:
      'eyJ0eXBlIjoid2ViYXV0aG4uZ2V0IiwiY2hhbGxlbmdlIjoicThZYzJtMUt4MHY5Yk4zclQ2d0U1dUk0b1A3YVMxZEYyZ0gzaks0bFo1eCIsIm9yaWdpbiI6Imh0dHBzOi8vd3Jpc3RiYW5kLmV4YW1wbGUuY29tIiwiY3Jvc3NPcmlnaW4iOmZhbHNlfQ',
    authenticatorData: 'SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFAAAAAQ',
    signature:
      'MEUCIQDx3Xq1y0bQ7pN2aK9sJ4fV6hT8rL1mC5wE0gZ2uI3oYgIgW7vB9nD4kF6jH1sA8qP0tR5eX2cU3yM7lN9oZ4iK6bQ',
    userHandle: 'YWRtaW46MQ',
  },
  clientExtensionResults: {},
  authenticatorAttachment: 'platform',
}

const passkeyExample = {
  id: 1,
  name: 'Work laptop',
  created_at: 1782900000000,
  last_used_at: null,
  backed_up: true,
  transports: ['internal', 'hybrid'],
}

export const PASSKEYS_OPENAPI: FeatureOpenApi = {
  tags: {
    passkeys: "The administrator's passkeys (WebAuthn); sign-in with a passkey is under auth",
  },
  operations: {
    'POST /admin/passkeys/registration/options': {
      operationId: 'startPasskeyRegistration',
      returns: 'WebAuthn creation options, and the flow the challenge is bound to',
      response: { flow: PASSKEY_FLOW, options: creationOptions },
      errors: MFA_REQUIRED,
    },
    'POST /admin/passkeys/registration': {
      operationId: 'registerPasskey',
      returns: 'The passkey, stored',
      request: { flow: PASSKEY_FLOW, name: 'Work laptop', response: registrationCredential },
      response: passkeyExample,
      errors: MFA_REQUIRED,
    },
    'GET /admin/passkeys': {
      operationId: 'listPasskeys',
      returns: "The calling administrator's passkeys",
      response: [{ ...passkeyExample, last_used_at: 1782901800000 }],
    },
    'DELETE /admin/passkeys/{id}': {
      operationId: 'removePasskey',
      returns: 'The passkey is removed',
      response: { message: 'Passkey removed' },
      errors: MFA_REQUIRED,
    },
    'POST /auth/passkey/options': {
      operationId: 'startPasskeySignIn',
      returns: 'WebAuthn request options, and the flow the challenge is bound to',
      response: { flow: PASSKEY_FLOW, options: requestOptions },
    },
    'POST /auth/passkey': {
      operationId: 'signInWithPasskey',
      returns: 'An access token with a fresh mfa_verified_at and a refresh token',
      request: { flow: PASSKEY_FLOW, response: authenticationCredential },
      response: tokenPair,
    },
  },
}
