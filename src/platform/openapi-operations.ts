/**
 * What the OpenAPI document says about each operation beyond its route schema: the operationId (the
 * name a generated client gives the call), what a success answers, examples, and the `error` codes an
 * error status can carry. Kept in one table so that 57 route files need not repeat the same five
 * fields; a route may instead put `operationId` in its own schema. `finishDocument` (openapi.ts)
 * merges this into the document, and src/platform/openapi.test.ts checks every route is covered.
 */
import type { SentErrorCode } from './errors.js'

export interface OperationDoc {
  operationId: string
  /** What the success answer is (its response description). */
  returns: string
  /** An example request body. */
  request?: unknown
  /** The body may be left out altogether (the route reads it as `{}`). */
  bodyOptional?: boolean
  /** An example success answer. */
  response?: unknown
  /** For an error status: each `error` code it can carry, with when, and an example `detail`. */
  errors?: Record<number, ErrorCase[]>
}

/** One cause of an error status: its code (from ERROR_CODES, which also gives the body field). */
export interface ErrorCase {
  code: SentErrorCode
  when: string
  detail: string
  /** Other fields of the body. */
  extra?: Record<string, unknown>
}

/**
 * While an administrator's MFA is on, the routes that create lasting credentials or accounts, and
 * MFA setup, need a fresh verification (mfa/fresh-mfa.ts, `credentialGuard`).
 */
const MFA_REQUIRED: Record<number, ErrorCase[]> = {
  403: [
    {
      code: 'mfa_required',
      when: "the administrator's MFA is on and the token has no fresh `mfa_verified_at`: verify a TOTP code at /admin/mfa/verify first",
      detail:
        'While MFA is on this needs a fresh MFA verification: verify a code of your authenticator first',
    },
  ],
}

/** PASSKEYS_REQUIRED_FOR: an administrator in scope who has a passkey gives it, never a TOTP code. */
const PASSKEY_REQUIRED: ErrorCase = {
  code: 'passkey_required',
  when: 'PASSKEYS_REQUIRED_FOR covers the administrator, who has a passkey: sign in with it at /auth/passkey',
  detail: 'PASSKEYS_REQUIRED_FOR: this account signs in with its passkey, not with a TOTP code',
}

// WebAuthn examples (some values shortened; a browser or @simplewebauthn/browser produces the real ones).
const PASSKEY_FLOW = 'v3yJ0H8k2M1qQ7bL9xW4tZr6uA5sD0fG1hJ2kL3mN4o'
const CHALLENGE = 'q8Yc2m1Kx0v9bN3rT6wE5uI4oP7aS1dF2gH3jK4lZ5x'
const CREDENTIAL_ID = 'AX1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v'
const creationOptions = {
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
const requestOptions = {
  rpId: 'wristband.example.com',
  challenge: CHALLENGE,
  timeout: 300000,
  userVerification: 'required',
}
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

/** Example values reused across operations, so that one example request leads to the next's answer. */
export const EVENT = 'summer-festival-2026'
export const TICKET_UID = '5f0c6a1e9d2b4c7f8a3e1d0b6c9f2a47'
export const TRANSFER_UID = '8b1d2c3e4f5a6b7c8d9e0f1a2b3c4d5e'
const CLAIM_TOKEN = 'q3L1v0Zk8m2QxT7bR5yN9pWc4HdJfGsA6eUoKiYtV1w'
export const AT = '2026-07-01T09:30:00.000Z'
const ACCESS = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIiwicm9sZSI6ImFkbWluIn0.c2lnbmF0dXJl'
const REFRESH =
  'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIiwidHlwZSI6InJlZnJlc2giLCJqdGkiOiJyMSJ9.c2lnbmF0dXJlLXJlZnJlc2g'
export const TICKET_CODE =
  'eyJhbGciOiJFZERTQSIsImtpZCI6ImVkLTNmOWEifQ.eyJlIjo0MiwidCI6IjhiMWQyYzNlNGY1YTZiN2M4ZDllMGYxYTJiM2M0ZDVlIiwidiI6MX0.c2lnbmF0dXJlLW9mLXRoZS1lZGdlLWtleQ'

export const TIMEZONE = 'Europe/Berlin'
export const USED_LOCAL = '2026-07-18T20:14:03.000'
export const USED_UTC = '2026-07-18T18:14:03.000Z'
const holderTicket = {
  transfer_uid: TRANSFER_UID,
  event_uid: EVENT,
  event_name: 'Summer Festival 2026',
  ticket_uid: TICKET_UID,
  name: 'Weekend pass',
  ticket_date: '2026-07-18T20:00:00.000',
  status: 'CLAIMED',
  used_timestamp: null,
  used_at: null,
  event_timezone: TIMEZONE,
  access_gate: 'North',
  seat_number: null,
  balance: 20,
  promo_balance: 5,
  ticket_code: TICKET_CODE,
}
const linkView = {
  event_uid: EVENT,
  event_name: 'Summer Festival 2026',
  email: 'holder@example.com',
  claimed: true,
  tickets: [holderTicket],
}
const tokenPair = { access_token: ACCESS, refresh_token: REFRESH, token_type: 'bearer', expires_in: 900 }
/** After a TOTP code or a passkey: the access token carries `mfa_verified_at`. */
const mfaTokenPair = {
  ...tokenPair,
  access_token:
    'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIiwicm9sZSI6ImFkbWluIiwibWZhX3ZlcmlmaWVkX2F0IjoxNzgyODk4MjAwfQ.c2lnbmF0dXJlLW1mYQ',
}
const consumerTokenPair = {
  access_token:
    'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI0MiIsInJvbGUiOiJjb25zdW1lciJ9.c2lnbmF0dXJlLWNvbnN1bWVy',
  refresh_token:
    'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI0MiIsInR5cGUiOiJyZWZyZXNoIiwianRpIjoicjcifQ.c2lnbmF0dXJlLXJlZnJlc2g',
  token_type: 'bearer',
  expires_in: 900,
}
/** An offline token (EdDSA, signed with the edge key; OFFLINE_TOKEN_EXPIRE_HOURS, 72 by default). */
const OFFLINE_TOKEN =
  'eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCIsImtpZCI6IlZxM244ZFhrMkx3In0.eyJzdWIiOiI3Iiwicm9sZSI6Im9wZXJhdG9yIiwidHlwZSI6Im9mZmxpbmUiLCJldmVudF9pZCI6MSwiZGV2aWNlX2lkIjozfQ.c2lnbmF0dXJlLW9mZmxpbmU'
const OFFLINE_EXPIRES_AT = '2026-07-04T09:30:00.000Z'
const dashboardUser = { id: 3, username: 'acme-box-office', event_ids: [1], created_at: AT }
const consumerView = {
  id: 42,
  phone: '+4915112345678',
  email: 'holder@example.com',
  first_name: 'Alex',
  last_name: 'Meyer',
  has_password: true,
  identity_providers: [],
  created_at: AT,
}
const apiKeyView = {
  id: 5,
  name: 'Acme box office 2026',
  event_id: 1,
  partner: 'Acme Tickets',
  scopes: ['api:read', 'api:write'],
  created_at: AT,
}
/** Uses over the last hour (range=1h: twelve 5-minute buckets, empty ones included). */
const STATS_FROM = 1784403000 // 2026-07-18T19:30:00Z
const usesPerBucket = [0, 2, 5, 9, 14, 21, 30, 26, 18, 11, 7, 4]
const eventStats = {
  event: { id: 1, uid: EVENT, name: 'Summer Festival 2026', timezone: TIMEZONE },
  generated_at: '2026-07-18T20:30:00.000Z',
  totals: {
    issued: 1200,
    claimed: 1038,
    used: 412,
    revenue: 179400,
    balance_loaded: 24000,
    promo_balance_loaded: 6000,
  },
  ticket_types: [
    {
      ticket_uid: TICKET_UID,
      name: 'Weekend pass',
      ticket_date: '2026-07-18T20:00:00.000',
      price: 149.5,
      issued: 1200,
      claimed: 1038,
      used: 412,
      revenue: 179400,
    },
  ],
  uses_over_time: {
    range: '1h',
    bucket_seconds: 300,
    from: '2026-07-18T19:30:00.000Z',
    to: '2026-07-18T20:30:00.000Z',
    total: usesPerBucket.reduce((a, b) => a + b, 0),
    points: usesPerBucket.map((count, i) => ({ t: STATS_FROM + i * 300, count })),
  },
  uses_per_gate: [
    { access_gate: 'North', count: 301 },
    { access_gate: 'South', count: 108 },
    { access_gate: null, count: 3 },
  ],
  webhook: {
    configured: true,
    url: 'https://partner.example.com/wristband/webhooks',
    disabled: false,
    disabled_reason: null,
    delivered: 409,
    pending: 2,
    failing: 1,
    failed: 0,
    last_error: { at: '2026-07-18T20:14:03.000Z', message: 'HTTP 503' },
  },
}
export const idempotencyInUse: ErrorCase = {
  code: 'idempotency_key_in_use',
  when: 'a request with the same Idempotency-Key is still being processed; retry shortly',
  detail: 'A request with this Idempotency-Key is still being processed',
}

export const OPERATIONS: Record<string, OperationDoc> = {
  'GET /': {
    operationId: 'getIndex',
    returns: 'Where to go from here',
    response: {
      service: 'wristband',
      version: '0.3.0',
      links: {
        docs: '/docs',
        openapi: '/openapi.json',
        dashboard: '/dashboard',
        health: '/health',
        ready: '/ready',
      },
    },
  },
  'GET /health': { operationId: 'getHealth', returns: 'The process is alive', response: { status: 'ok' } },
  'GET /ready': {
    operationId: 'getReadiness',
    returns: 'The database (and Redis, when configured) answer',
    response: {
      status: 'ready',
      checks: {
        database: { status: 'up', dialect: 'postgres' },
        data_dir: { status: 'up' },
        redis: { status: 'up' },
      },
    },
  },

  // auth
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
  'POST /tokens/verify': {
    operationId: 'verifyToken',
    returns: 'Whether the token is valid, and its claims when it is',
    request: { token: ACCESS },
    response: { valid: true, claims: { sub: '1', role: 'admin', exp: 1782901800 } },
  },
  'POST /tokens/offline': {
    operationId: 'createOfflineToken',
    request: { event_id: 1, device_id: 'gate-north-3' },
    returns: 'The offline token',
    response: { offline_token: OFFLINE_TOKEN, expires_at: OFFLINE_EXPIRES_AT, event_id: 1 },
    errors: MFA_REQUIRED,
  },
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

  // MFA
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

  // password reset
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

  // API keys
  'POST /tokens/api-key': {
    operationId: 'createApiKey',
    request: {
      event_id: 1,
      name: 'Acme box office 2026',
      scopes: ['api:read', 'api:write'],
      partner: 'Acme Tickets',
    },
    returns: 'The new key; its plaintext is shown only here',
    response: { ...apiKeyView, api_key: 'wb_Xk9mQ2vL7pR4tW1nB8cF3hJ6sD0gY5eA2uK7oZ4iM9q' },
    errors: MFA_REQUIRED,
  },
  'DELETE /tokens/api-key/{key_id}': {
    operationId: 'revokeApiKey',
    returns: 'The key is revoked',
    response: { message: 'API key revoked' },
  },
  'GET /tokens/api-keys': {
    operationId: 'listApiKeys',
    returns: "The event's keys, without secrets",
    response: [
      { ...apiKeyView, prefix: 'wb_Xk9mQ2v', last_used_at: '2026-07-18T20:14:03.000Z', revoked_at: null },
    ],
  },

  // audit, dashboard users, stats
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
    },
  },
  'GET /events/{event_id}/stats': {
    operationId: 'getEventStats',
    returns: 'The figures of the event',
    response: eventStats,
  },
  'GET /dashboard/api/events/{event_id}/stats': {
    operationId: 'getDashboardEventStats',
    returns: 'The figures of the event',
    response: eventStats,
  },
  'GET /admin/dashboard-users': {
    operationId: 'listDashboardUsers',
    returns: 'The dashboard users',
    response: [dashboardUser],
  },
  'POST /admin/dashboard-users': {
    operationId: 'createDashboardUser',
    request: { username: 'acme-box-office', password: 'correct horse battery staple', event_ids: [1] },
    returns: 'The dashboard user created',
    response: dashboardUser,
    errors: {
      ...MFA_REQUIRED,
      409: [{ code: 'username_taken', when: 'the username exists', detail: 'Username already taken' }],
    },
  },
  'PATCH /admin/dashboard-users/{user_id}': {
    operationId: 'updateDashboardUser',
    request: { event_ids: [1, 2] },
    returns: 'The dashboard user as changed',
    response: { ...dashboardUser, event_ids: [1, 2] },
    errors: MFA_REQUIRED,
  },
  'DELETE /admin/dashboard-users/{user_id}': {
    operationId: 'deleteDashboardUser',
    returns: 'The dashboard user is removed',
    response: { message: 'Dashboard user removed' },
    errors: MFA_REQUIRED,
  },

  // dashboard pages (HTML)
  'GET /dashboard/login': { operationId: 'getDashboardLoginPage', returns: 'The sign-in page' },
  'POST /dashboard/login': {
    operationId: 'dashboardLogin',
    returns: 'Signed in (to the event list), or, for an administrator whose MFA is on, on to the code step',
  },
  'GET /dashboard/login/code': { operationId: 'getDashboardCodeStepPage', returns: 'The TOTP step page' },
  'POST /dashboard/login/code': { operationId: 'dashboardLoginCode', returns: 'Signed in' },
  'GET /dashboard/login/passkey': {
    operationId: 'getDashboardPasskeyStepPage',
    returns: 'The passkey step page',
  },
  'POST /dashboard/login/passkey/options': {
    operationId: 'dashboardPasskeySignInOptions',
    returns: 'WebAuthn request options; the flow is in a cookie',
    response: { options: requestOptions },
  },
  'POST /dashboard/login/passkey': { operationId: 'dashboardLoginPasskey', returns: 'Signed in' },
  'GET /dashboard/passkeys': {
    operationId: 'getDashboardPasskeysPage',
    returns: "The account's passkeys page",
  },
  'POST /dashboard/passkeys/options': {
    operationId: 'dashboardPasskeyRegistrationOptions',
    returns: 'WebAuthn creation options; the flow is in a cookie',
    response: { options: creationOptions },
  },
  'POST /dashboard/passkeys': {
    operationId: 'dashboardAddPasskey',
    returns: 'Added: back to the passkeys page',
  },
  'POST /dashboard/passkeys/{id}/delete': {
    operationId: 'dashboardRemovePasskey',
    returns: 'Removed: back to the passkeys page',
  },
  'POST /dashboard/logout': { operationId: 'dashboardLogout', returns: 'Signed out' },
  'GET /dashboard': { operationId: 'getDashboardEventsPage', returns: 'The event list page' },
  'GET /dashboard/events/{event_id}': {
    operationId: 'getDashboardEventPage',
    returns: "The event's page",
  },

  'GET /dashboard/events/{event_id}/webhooks': {
    operationId: 'getDashboardWebhookDeliveriesPage',
    returns: "The page of the event's webhook deliveries",
  },
  'POST /dashboard/events/{event_id}/webhooks/deliveries/{delivery_id}/resend': {
    operationId: 'dashboardResendWebhookDelivery',
    returns: 'Scheduled; back to the deliveries page',
  },

  // consumers
  'POST /auth/login/customer': {
    operationId: 'loginConsumer',
    returns: 'An access token and a refresh token for the consumer',
    request: { phone: '+31612345678', password: 'correct horse battery staple' },
    response: tokenPair,
  },
  'POST /auth/login/phone': {
    operationId: 'sendPhoneLoginCode',
    request: { phone: '+4915112345678' },
    returns: 'Accepted; a code is sent when the number belongs to a consumer',
    response: { message: 'If the number is registered, a code has been sent' },
  },
  'POST /auth/login/phone/verify': {
    operationId: 'loginConsumerWithPhoneCode',
    request: { phone: '+4915112345678', code: '381924' },
    returns: 'An access token and a refresh token for the consumer',
    response: consumerTokenPair,
  },
  'POST /verify/messaging/start': {
    operationId: 'startPhoneVerification',
    request: { phone: '+4915112345678' },
    returns: 'A code is sent by SMS',
    response: { status: 'pending' },
  },
  'POST /verify/messaging/check': {
    operationId: 'checkPhoneVerification',
    request: { phone: '+4915112345678', code: '381924' },
    returns: 'The verification token for POST /auth/register',
    response: { status: 'approved', verification_token: 'vt_Jx2m9QeR4tYb7LpW0sKd3nA6' },
  },
  'POST /auth/register': {
    operationId: 'registerConsumer',
    request: {
      phone: '+4915112345678',
      password: 'correct horse battery staple',
      verification_token: 'vt_Jx2m9QeR4tYb7LpW0sKd3nA6',
      email: 'holder@example.com',
      first_name: 'Alex',
      last_name: 'Meyer',
    },
    returns: 'The consumer is registered',
    response: consumerTokenPair,
  },
  'GET /consumers/me': {
    operationId: 'getCurrentConsumer',
    returns: 'The signed-in consumer',
    response: consumerView,
  },
  'PATCH /consumers/me': {
    operationId: 'updateCurrentConsumer',
    request: { email: 'holder@example.com', first_name: 'Alex', last_name: null },
    returns: 'The profile as changed',
    response: { ...consumerView, last_name: null },
  },
  'POST /auth/login/idp': {
    operationId: 'loginConsumerWithIdp',
    request: { id_token: ACCESS },
    returns: 'An access token and a refresh token for the consumer',
    response: consumerTokenPair,
  },

  // devices and tickets
  'POST /devices/auth': {
    operationId: 'identifyDevice',
    request: { dev_mac: 'AA:BB:CC:DD:EE:01', event_id: 1, device_key: 'dk_3tQ9xY2mB7vL0pR5sW8eN1cF' },
    returns: 'The device and its event',
    response: {
      id: 3,
      dev_mac: 'AA:BB:CC:DD:EE:01',
      event_id: 1,
      operator_id: 7,
      event: { uid: EVENT, name: 'Summer Festival 2026', timezone: TIMEZONE },
    },
  },
  'POST /auth/login/device': {
    operationId: 'loginDevice',
    request: { dev_mac: 'AA:BB:CC:DD:EE:01', event_id: 1, device_key: 'dk_3tQ9xY2mB7vL0pR5sW8eN1cF' },
    returns: 'The offline token of the device',
    response: { offline_token: OFFLINE_TOKEN, token_type: 'bearer', expires_at: OFFLINE_EXPIRES_AT },
  },
  'POST /devices/{device_id}/token': {
    operationId: 'issueDeviceToken',
    request: { operator_id: 7 },
    returns: 'The device token, associated with the operator',
    response: { token: OFFLINE_TOKEN, token_type: 'bearer' },
    errors: MFA_REQUIRED,
  },
  'POST /devices/operator-token': {
    operationId: 'issueOperatorToken',
    request: {
      email: 'op@example.com',
      password: 'correct horse battery staple',
      dev_type: 'POS',
      dev_mac: 'AA:BB:CC:DD:EE:01',
    },
    returns: 'The operator token',
    response: {
      user_id: 7,
      event_id: 1,
      email: 'op@example.com',
      token: 'wbs_4fT9kQ2mX7vB1nR8pL3wZ6yC0dH5jS',
      mode: 0,
      dev_type: 'POS',
    },
  },
  'POST /tickets/{transfer_uid}/use': {
    operationId: 'useTicket',
    returns: 'The ticket is used (the first use)',
    bodyOptional: true,
    request: { access_gate: 'North' },
    response: { status: 'USED', used_timestamp: USED_LOCAL, used_at: USED_UTC },
    errors: {
      409: [
        {
          code: 'already_used',
          when: 'the ticket was used before; `used_timestamp` tells when',
          detail: 'Ticket already used',
          extra: { used_timestamp: USED_LOCAL, used_at: USED_UTC },
        },
      ],
    },
  },
  'POST /tickets/use-batch': {
    operationId: 'useTicketBatch',
    returns: 'One result per scan, in order',
    response: {
      results: [
        { transfer_uid: TRANSFER_UID, status: 'USED', used_timestamp: USED_LOCAL, used_at: USED_UTC },
        {
          transfer_uid: '5f1c0e7a9b2d4c6e8f0a1b3c5d7e9f01',
          status: 'ALREADY_USED',
          used_timestamp: '2026-07-18T20:02:47.000',
          used_at: '2026-07-18T18:02:47.000Z',
        },
        { transfer_uid: '0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a', status: 'NOT_FOUND' },
      ],
    },
  },

  // partner
  'GET /holder/links/{token}': {
    operationId: 'getClaimLink',
    returns: "The link's event and tickets",
    response: { ...linkView, claimed: false, tickets: [{ ...holderTicket, status: 'TRANSFERRED' }] },
  },
  'POST /holder/links/{token}/claim': {
    operationId: 'claimLink',
    returns: "The link's tickets, now the consumer's",
    response: linkView,
    errors: {
      409: [
        {
          code: 'already_claimed',
          when: 'another consumer claimed the link',
          detail: 'This link was already claimed by another account',
        },
      ],
    },
  },
  'GET /consumers/me/tickets': {
    operationId: 'listMyTickets',
    returns: "The consumer's tickets",
    response: { tickets: [holderTicket] },
  },
  'GET /consumers/me/wallets': {
    operationId: 'listMyWallets',
    returns: "The consumer's balances",
    response: {
      wallets: [
        {
          event_uid: EVENT,
          event_name: 'Summer Festival 2026',
          balance: 20,
          promo_balance: 5,
          updated_at: AT,
        },
      ],
    },
  },
}

/** The claim token of the examples, for path parameter examples. */
export const EXAMPLE_PARAMS: Record<string, string> = {
  token: CLAIM_TOKEN,
  company_ticket_id: 'order-1042-1',
  transfer_uid: TRANSFER_UID,
}

/** Tags whose operations must carry request (when they take a body) and response examples. */
export const TAGS_WITH_EXAMPLES = ['partner', 'webhooks', 'holder', 'auth', 'passkeys']

export const TAG_DESCRIPTIONS: Record<string, string> = {
  partner: 'Ticket partners (API key in the `api_key` header): the ticket catalogue and transfers',
  webhooks: 'Ticket partners: the receiver of use notifications and its deliveries',
  holder: 'Ticket holders: claim links from the transfer e-mail',
  auth: 'Sign-in of administrators, operators and network managers; token refresh and sign-out',
  tokens: 'Token checks and offline tokens',
  consumers: 'Consumers (ticket holders with an account): sign-in, registration, profile, tickets',
  devices: 'Scanning devices and their operators',
  tickets: 'Ticket use (scans)',
  offline: 'Offline scanning at the gate: the edge key set and the scanner sync feed',
  'api-keys': 'API keys of ticket partners',
  admin: 'The signed-in administrator',
  mfa: 'Multi-factor authentication (TOTP)',
  passkeys: "The administrator's passkeys (WebAuthn); sign-in with a passkey is under auth",
  'password-reset': 'Administrator password reset',
  audit: 'Security events',
  dashboard: 'Dashboard users and event figures (JSON)',
  'dashboard pages': 'The dashboard (HTML pages for browsers)',
  health: 'Liveness and readiness probes',
  metrics: 'Prometheus metrics',
}
