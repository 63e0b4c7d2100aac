/**
 * Example values the OpenAPI texts of several features' routes share (each route's `doc`), so
 * that one example request leads to the next's answer: the event, ticket and transfer of the examples,
 * the tokens sign-in answers, WebAuthn options, and the error of the fresh-MFA guard.
 */
import type { ErrorCase } from './openapi-operations.js'

/**
 * While an administrator's MFA is on, the routes that create lasting credentials or accounts, and
 * MFA setup, need a fresh verification (mfa/fresh-mfa.ts, `credentialGuard`).
 */
export const MFA_REQUIRED: Record<number, ErrorCase[]> = {
  403: [
    {
      code: 'mfa_required',
      when: "the administrator's MFA is on and the token has no fresh `mfa_verified_at`: verify a TOTP code at /admin/mfa/verify first",
      detail:
        'While MFA is on this needs a fresh MFA verification: verify a code of your authenticator first',
    },
  ],
}

// WebAuthn examples (some values shortened; a browser or @simplewebauthn/browser produces the real ones).
const CHALLENGE = 'q8Yc2m1Kx0v9bN3rT6wE5uI4oP7aS1dF2gH3jK4lZ5x'
export const creationOptions = {
  rp: { name: 'wristband', id: 'wristband.example.com' },
  user: { id: 'YWRtaW46MQ', name: 'admin@example.com', displayName: '' },
  challenge: CHALLENGE,
  pubKeyCredParams: [
    { alg: -8, type: 'public-key' },
    { alg: -7, type: 'public-key' },
    { alg: -257, type: 'public-key' },
  ],
  timeout: 300000,
  attestation: 'none',
  excludeCredentials: [],
  authenticatorSelection: {
    residentKey: 'preferred',
    userVerification: 'required',
    requireResidentKey: false,
  },
  extensions: { credProps: true },
}
export const requestOptions = {
  rpId: 'wristband.example.com',
  challenge: CHALLENGE,
  timeout: 300000,
  userVerification: 'required',
}

export const EVENT = 'summer-festival-2026'
export const TICKET_UID = '5f0c6a1e9d2b4c7f8a3e1d0b6c9f2a47'
export const TRANSFER_UID = '8b1d2c3e4f5a6b7c8d9e0f1a2b3c4d5e'
export const AT = '2026-07-01T09:30:00.000Z'
export const ACCESS = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIiwicm9sZSI6ImFkbWluIn0.c2lnbmF0dXJl'
export const REFRESH =
  'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIiwidHlwZSI6InJlZnJlc2giLCJqdGkiOiJyMSJ9.c2lnbmF0dXJlLXJlZnJlc2g'
export const TICKET_CODE =
  'eyJhbGciOiJFZERTQSIsImtpZCI6ImVkLTNmOWEifQ.eyJlIjo0MiwidCI6IjhiMWQyYzNlNGY1YTZiN2M4ZDllMGYxYTJiM2M0ZDVlIiwidiI6MX0.c2lnbmF0dXJlLW9mLXRoZS1lZGdlLWtleQ'

export const TIMEZONE = 'Europe/Berlin'
export const USED_LOCAL = '2026-07-18T20:14:03.000'
export const USED_UTC = '2026-07-18T18:14:03.000Z'
export const tokenPair = {
  access_token: ACCESS,
  refresh_token: REFRESH,
  token_type: 'bearer',
  expires_in: 900,
}
export const consumerTokenPair = {
  access_token:
    'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI0MiIsInJvbGUiOiJjb25zdW1lciJ9.c2lnbmF0dXJlLWNvbnN1bWVy',
  refresh_token:
    'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI0MiIsInR5cGUiOiJyZWZyZXNoIiwianRpIjoicjcifQ.c2lnbmF0dXJlLXJlZnJlc2g',
  token_type: 'bearer',
  expires_in: 900,
}
/** An offline token (EdDSA, signed with the edge key; OFFLINE_TOKEN_EXPIRE_HOURS, 72 by default). */
export const OFFLINE_TOKEN =
  'eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCIsImtpZCI6IlZxM244ZFhrMkx3In0.eyJzdWIiOiI3Iiwicm9sZSI6Im9wZXJhdG9yIiwidHlwZSI6Im9mZmxpbmUiLCJldmVudF9pZCI6MSwiZGV2aWNlX2lkIjozfQ.c2lnbmF0dXJlLW9mZmxpbmU'
export const OFFLINE_EXPIRES_AT = '2026-07-04T09:30:00.000Z'

/** The 403 of the scanner feed and scan uploads for a token of a device without a device key. */
export const DEVICE_KEY_REQUIRED: Record<number, ErrorCase[]> = {
  403: [
    {
      code: 'device_key_required',
      when: 'the token is of a device without a device key (DEVICE_KEYS_REQUIRED=false): such a device holds no sync:* scope',
      detail:
        'A device without a device key does not sync: give it a key (wristband device rotate-key, or a set-up code)',
    },
  ],
}
