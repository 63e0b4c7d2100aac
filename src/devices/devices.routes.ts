import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { ProtectCredentials } from '../mfa/fresh-mfa.js'
import type { Config } from '../platform/config.js'
import type { SecretKeys } from '../platform/keys.js'
import {
  EVENT,
  MFA_REQUIRED,
  OFFLINE_EXPIRES_AT,
  OFFLINE_TOKEN,
  TIMEZONE,
} from '../platform/openapi-examples.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { Revocation, RevocationStore } from '../tokens/revocations.js'
import {
  DeviceAuthRequest,
  DeviceInfo,
  DeviceLoginResponse,
  DeviceRevokeParams,
  DeviceRevokeQuery,
  DeviceRevokeResponse,
  DeviceSetupRequest,
  DeviceSetupResponse,
  DeviceTokenParams,
  DeviceTokenRequest,
  DeviceTokenResponse,
  OperatorLoginRequest,
  OperatorLoginResponse,
  SetupCodeParams,
  SetupCodeResponse,
} from './devices.schemas.js'
import { type DeviceDeps, DeviceService, SESSION_PREFIX } from './devices.service.js'

export interface DeviceRoutesDeps
  extends Omit<DeviceDeps, 'sealer' | 'keysRequired' | 'publishRevocation' | 'setup'> {
  protectCredentials: ProtectCredentials
  /** Operator session tokens are sealed with the `operator-session` sealer. */
  keys: SecretKeys
  /** The revocation list: a device set up again ends its earlier tokens on every instance at once. */
  revocations: Pick<RevocationStore, 'revoke'>
  config: Pick<Config, 'DEVICE_KEYS_REQUIRED' | 'NODE_ENV' | 'DEVICE_SETUP_CODE_MINUTES' | 'PUBLIC_BASE_URL'>
}

export const deviceRoutes: FastifyPluginAsyncTypebox<DeviceRoutesDeps> = async (app, given) => {
  const { config, tokens } = given
  if (config.NODE_ENV === 'production' && !config.DEVICE_KEYS_REQUIRED)
    app.log.warn(
      'DEVICE_KEYS_REQUIRED=false in production: a device without a key signs in with its MAC and event id alone',
    )
  const deps = {
    ...given,
    sealer: given.keys.sealer('operator-session'),
    keysRequired: config.DEVICE_KEYS_REQUIRED,
    publishRevocation: (entry: Revocation) => given.revocations.revoke([entry]),
    setup: { minutes: config.DEVICE_SETUP_CODE_MINUTES, publicBaseUrl: config.PUBLIC_BASE_URL },
  }
  const devices = new DeviceService(deps)
  // Operator session tokens are credentials of the token guard, and end when the operator logs out
  // or their holder revokes them (POST /oauth2/revoke).
  tokens.registerCredential(
    SESSION_PREFIX,
    (token) => devices.resolveSession(token),
    async (token) => {
      const claims = await devices.resolveSession(token)
      if (claims) await devices.endSession(Number(claims.sub))
      return claims
    },
  )
  tokens.onLogout(async (caller) => {
    if (caller.role === 'operator') await devices.endSession(Number(caller.sub))
  })
  app.post(
    '/devices/auth',
    {
      config: perMinute(60),
      schema: {
        tags: ['devices'],
        summary: 'Identify a device of an event',
        description:
          'Answers the device when it is registered for the event and not archived; 404 otherwise. A device ' +
          'that has a device key (every device with DEVICE_KEYS_REQUIRED=true) must send it as `device_key`: ' +
          '401 when it is missing or wrong.',
        body: DeviceAuthRequest,
        response: { 200: DeviceInfo, ...errorResponses(401, 404) },
        doc: {
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
      },
    },
    async (request) => {
      const { dev_mac, event_id, device_key } = request.body
      const d = await devices.authenticate(dev_mac, event_id, device_key, request.ip)
      return {
        id: d.id,
        dev_mac: d.dev_mac,
        event_id: d.event_id,
        operator_id: d.operator_id,
        event: { uid: d.event_uid, name: d.event_name, timezone: d.event_timezone },
      }
    },
  )

  app.post(
    '/auth/login/device',
    {
      config: perMinute(60),
      schema: {
        tags: ['devices'],
        summary: 'Offline token for a device, acting as its associated operator',
        description:
          'Role operator, device baseline scopes at the device event, device_id and event_id set; lifetime ' +
          'OFFLINE_TOKEN_EXPIRE_HOURS. 404 for an unknown or archived device, 403 when no operator is associated, ' +
          '401 when the device has a device key (every device with DEVICE_KEYS_REQUIRED=true) and `device_key` ' +
          'is missing or wrong.',
        body: DeviceAuthRequest,
        response: { 200: DeviceLoginResponse, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'loginDevice',
          request: { dev_mac: 'AA:BB:CC:DD:EE:01', event_id: 1, device_key: 'dk_3tQ9xY2mB7vL0pR5sW8eN1cF' },
          returns: 'The offline token of the device',
          response: { offline_token: OFFLINE_TOKEN, token_type: 'bearer', expires_at: OFFLINE_EXPIRES_AT },
        },
      },
    },
    async (request) => {
      const { dev_mac, event_id, device_key } = request.body
      return devices.login(dev_mac, event_id, device_key, request.ip)
    },
  )

  app.post(
    '/devices/:device_id/token',
    {
      config: perMinute(30),
      ...deps.protectCredentials({ roles: ['admin', 'operator'] }),
      schema: {
        tags: ['devices'],
        summary: 'Associate an operator with a device and issue the device token',
        description:
          "Administrators, or operators reaching the device's event. The operator must belong to the device's " +
          "event (404 otherwise). While an administrator's MFA is enabled, the access token needs a fresh " +
          '`mfa_verified_at` (403 `{"detail", "error": "mfa_required"}` otherwise).',
        security: [{ OAuth2PasswordBearer: [] }],
        params: DeviceTokenParams,
        body: DeviceTokenRequest,
        response: { 200: DeviceTokenResponse, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'issueDeviceToken',
          request: { operator_id: 7 },
          returns: 'The device token, associated with the operator',
          response: { token: OFFLINE_TOKEN, token_type: 'bearer' },
          errors: MFA_REQUIRED,
        },
      },
    },
    async (request) => {
      return devices.issueDeviceToken(
        claimsOf(request),
        request.params.device_id,
        request.body.operator_id,
        request.ip,
      )
    },
  )

  app.post(
    '/devices/:device_id/setup-code',
    {
      config: perMinute(30),
      ...deps.protectCredentials({ roles: ['admin'] }),
      schema: {
        tags: ['devices'],
        summary: 'A one-time set-up code for a device, to show as a QR code',
        description:
          "Administrators of the device's event. The code (`wbsu_…`, and `setup_url`, what the QR code holds) " +
          'is exchanged once at POST /devices/setup for the device credentials, within ' +
          "DEVICE_SETUP_CODE_MINUTES (10); a new code replaces the device's earlier unused one. Only its " +
          'SHA-256 is stored. 404 for an unknown or archived device, 403 for one of an event the caller does ' +
          'not reach, 409 when no operator of its event is associated with the device. While the ' +
          "administrator's MFA is enabled, the access token needs a fresh `mfa_verified_at` (403 " +
          '`{"detail", "error": "mfa_required"}` otherwise).',
        security: [{ OAuth2PasswordBearer: [] }],
        params: SetupCodeParams,
        response: { 200: SetupCodeResponse, ...errorResponses(401, 403, 404, 409) },
        doc: {
          operationId: 'createDeviceSetupCode',
          returns: 'The set-up code, shown once, and the address its QR code holds',
          response: {
            device_id: 3,
            code: 'wbsu_Qm8rT2vX9kL4pN7sB1wZ0c',
            setup_url: 'https://auth.example.com/scanner/#setup=wbsu_Qm8rT2vX9kL4pN7sB1wZ0c',
            expires_at: '2026-07-18T18:24:03.000Z',
          },
          errors: MFA_REQUIRED,
        },
      },
    },
    async (request) => devices.newSetupCode(claimsOf(request), request.params.device_id, request.ip),
  )

  app.post(
    '/devices/:device_id/revoke',
    {
      config: perMinute(30),
      ...protect(tokens, { roles: ['admin'] }),
      schema: {
        tags: ['devices'],
        summary: "End a device's offline tokens (a lost or stolen scanner), optionally archiving it",
        description:
          "Administrators of the device's event; `wristband device revoke` does the same on the command " +
          'line. Every offline token issued to the device so far is refused on every instance within the ' +
          'revocation promise (1 s with Redis); the device signs in again for a new one, with its key when ' +
          'it has one. With `?archive=true` it can no longer sign in at all. Recorded in the audit log ' +
          '(`device_revoke`). 404 for an unknown device, 403 for one of an event the caller does not reach.',
        security: [{ OAuth2PasswordBearer: [] }],
        params: DeviceRevokeParams,
        querystring: DeviceRevokeQuery,
        response: { 200: DeviceRevokeResponse, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'revokeDevice',
          returns: "The device's offline tokens are revoked (and it is archived when asked)",
          response: { device_id: 3, archived: false, tokens_revoked: true },
        },
      },
    },
    async (request) =>
      devices.revoke(claimsOf(request), request.params.device_id, request.query.archive === true, request.ip),
  )

  app.post(
    '/devices/setup',
    {
      config: perMinute(10),
      schema: {
        tags: ['devices'],
        summary: "Exchange a set-up code for the device's credentials",
        description:
          'A scanner being set up sends the code of its QR code and gets its device id, MAC, event and a new ' +
          'device key, with which it signs in at POST /auth/login/device. Each code works once and only ' +
          'until it expires; the new key ends the offline tokens issued to the device before. An unknown, ' +
          'used or expired code is 404. 10 per minute per address; every exchange is audited.',
        body: DeviceSetupRequest,
        response: { 200: DeviceSetupResponse, ...errorResponses(404) },
        doc: {
          operationId: 'setUpDevice',
          request: { code: 'wbsu_Qm8rT2vX9kL4pN7sB1wZ0c' },
          returns: "The device's credentials: sign in with them at POST /auth/login/device",
          response: {
            device_id: 3,
            dev_mac: 'AA:BB:CC:DD:EE:01',
            event_id: 1,
            device_key: 'wbd_Xr4kP9mT2vL7qN1sB8wZ3cF6yH0dJ5gA2eU9iO4',
            event: { uid: EVENT, name: 'Summer Festival 2026', timezone: TIMEZONE },
          },
        },
      },
    },
    async (request) => devices.setUp(request.body.code, request.ip),
  )

  app.post(
    '/devices/operator-token',
    {
      config: perMinute(30),
      schema: {
        tags: ['devices'],
        summary: 'Operator session token for a device type',
        description:
          "The user's mode must allow the device type: POS any mode but 3-6, REPORT 3, FASTPASS 4, KIDS 5, " +
          'DISPATCH 6. Wrong credentials and a disallowed combination are the same 401. The token stays the ' +
          'same until the operator logs out (POST /auth/logout).',
        body: OperatorLoginRequest,
        response: { 200: OperatorLoginResponse, ...errorResponses(401) },
        doc: {
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
      },
    },
    async (request) => {
      return devices.operatorToken(request.body, request.ip)
    },
  )
}
