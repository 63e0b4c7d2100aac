/**
 * The passkeys feature's OpenAPI texts that are no one route's: its tags' descriptions and the example
 * values and error cases its routes share. Each route's own texts (operationId, what it answers, examples,
 * `error` codes) are in its schema's `doc`.
 */

import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const PASSKEY_FLOW = 'v3yJ0H8k2M1qQ7bL9xW4tZr6uA5sD0fG1hJ2kL3mN4o'

const CREDENTIAL_ID = 'AX1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v'

export const registrationCredential = {
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

export const authenticationCredential = {
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

export const passkeyExample = {
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
}
