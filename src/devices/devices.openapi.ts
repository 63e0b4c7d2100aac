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
