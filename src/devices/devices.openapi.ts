/** What the OpenAPI document says about the devices operations beyond their route schemas. */

import {
  EVENT,
  MFA_REQUIRED,
  OFFLINE_EXPIRES_AT,
  OFFLINE_TOKEN,
  TIMEZONE,
} from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const DEVICES_OPENAPI: FeatureOpenApi = {
  tags: {
    devices: 'Scanning devices and their operators',
  },
  operations: {
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
    'POST /devices/{device_id}/setup-code': {
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
    'POST /devices/{device_id}/revoke': {
      operationId: 'revokeDevice',
      returns: "The device's offline tokens are revoked (and it is archived when asked)",
      response: { device_id: 3, archived: false, tokens_revoked: true },
    },
    'POST /devices/setup': {
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
  },
}
