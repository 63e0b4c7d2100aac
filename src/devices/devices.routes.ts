import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { ProtectCredentials } from '../mfa/fresh-mfa.js'
import type { Config } from '../platform/config.js'
import { createSealer } from '../platform/keys.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { claimsOf } from '../tokens/guard.js'
import {
  DeviceAuthRequest,
  DeviceInfo,
  DeviceLoginResponse,
  DeviceTokenParams,
  DeviceTokenRequest,
  DeviceTokenResponse,
  OperatorLoginRequest,
  OperatorLoginResponse,
} from './devices.schemas.js'
import { type DeviceDeps, DeviceService, SESSION_PREFIX } from './devices.service.js'

export interface DeviceRoutesDeps extends Omit<DeviceDeps, 'sealer' | 'keysRequired'> {
  protectCredentials: ProtectCredentials
  /** The signing secrets: operator session tokens are sealed under a key derived from them. */
  secrets: readonly string[]
  config: Pick<Config, 'DEVICE_KEYS_REQUIRED' | 'NODE_ENV'>
}

export const deviceRoutes: FastifyPluginAsyncTypebox<DeviceRoutesDeps> = async (app, given) => {
  const { config, tokens } = given
  if (config.NODE_ENV === 'production' && !config.DEVICE_KEYS_REQUIRED)
    app.log.warn(
      'DEVICE_KEYS_REQUIRED=false in production: a device without a key signs in with its MAC and event id alone',
    )
  const deps = {
    ...given,
    sealer: createSealer(given.secrets, 'operator-session'),
    keysRequired: config.DEVICE_KEYS_REQUIRED,
  }
  const devices = new DeviceService(deps)
  // Operator session tokens are credentials of the token guard, and end when the operator logs out.
  tokens.registerCredential(SESSION_PREFIX, (token) => devices.resolveSession(token))
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
      },
    },
    async (request) => {
      return devices.operatorToken(request.body, request.ip)
    },
  )
}
