import { Type } from 'typebox'
import { DEV_TYPES } from './devices.service.js'

const strict = { additionalProperties: false }
const DevMac = Type.String({ minLength: 1, maxLength: 64, description: 'Device hardware address' })

export const DeviceAuthRequest = Type.Object(
  {
    dev_mac: DevMac,
    event_id: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }),
    device_key: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 128,
        description: 'The device key (wbd_…), required when the device has one or DEVICE_KEYS_REQUIRED=true',
      }),
    ),
  },
  strict,
)

export const DeviceInfo = Type.Object({
  id: Type.Integer(),
  dev_mac: Type.String(),
  event_id: Type.Integer(),
  operator_id: Type.Union([Type.Integer(), Type.Null()], {
    description: 'The associated operator, whose offline token /auth/login/device issues',
  }),
  event: Type.Object({ uid: Type.String(), name: Type.String(), timezone: Type.String() }),
})

export const DeviceLoginResponse = Type.Object({
  offline_token: Type.String(),
  token_type: Type.String(),
  expires_at: Type.String({ format: 'date-time' }),
})

export const DeviceTokenParams = Type.Object({ device_id: Type.Integer() })

export const DeviceTokenRequest = Type.Object({ operator_id: Type.Integer() }, strict)

export const DeviceTokenResponse = Type.Object({
  token: Type.String({
    description: "Offline token of the device, acting as the operator at the device's event",
  }),
  token_type: Type.String(),
})

export const OperatorLoginRequest = Type.Object(
  {
    email: Type.String({ minLength: 3, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 256 }),
    dev_type: Type.Union(
      DEV_TYPES.map((t) => Type.Literal(t)),
      { description: 'POS for modes other than 3-6; REPORT mode 3, FASTPASS 4, KIDS 5, DISPATCH 6' },
    ),
    dev_mac: DevMac,
  },
  strict,
)

export const OperatorLoginResponse = Type.Object({
  user_id: Type.Integer(),
  event_id: Type.Union([Type.Integer(), Type.Null()]),
  email: Type.String(),
  token: Type.String({ description: 'Operator session token (wbs_…), the same until the operator logs out' }),
  mode: Type.Integer(),
  dev_type: Type.String(),
})

export const SetupCodeParams = Type.Object({ device_id: Type.Integer() })

export const SetupCodeResponse = Type.Object({
  device_id: Type.Integer(),
  code: Type.String({
    description: 'The one-time set-up code (wbsu_…), shown once: only its SHA-256 is stored',
  }),
  setup_url: Type.String({
    description:
      "What the QR code holds: the service's scanner page (PUBLIC_BASE_URL/scanner/) with the code in the fragment",
  }),
  expires_at: Type.String({ format: 'date-time', description: 'After DEVICE_SETUP_CODE_MINUTES' }),
})

export const DeviceSetupRequest = Type.Object(
  { code: Type.String({ minLength: 1, maxLength: 128, description: 'The set-up code (wbsu_…)' }) },
  strict,
)

export const DeviceSetupResponse = Type.Object({
  device_id: Type.Integer(),
  dev_mac: Type.String(),
  event_id: Type.Integer(),
  device_key: Type.String({
    description:
      'A new device key (wbd_…): the device sends it with dev_mac and event_id to POST /auth/login/device',
  }),
  event: Type.Object({ uid: Type.String(), name: Type.String(), timezone: Type.String() }),
})

export const DeviceRevokeParams = Type.Object({ device_id: Type.Integer() })

export const DeviceRevokeQuery = Type.Object(
  {
    archive: Type.Optional(
      Type.Boolean({
        description:
          'Also archive the device: it can no longer sign in at all (a stolen scanner). Default false.',
      }),
    ),
  },
  { additionalProperties: false },
)

export const DeviceRevokeResponse = Type.Object({
  device_id: Type.Integer(),
  archived: Type.Boolean({ description: 'Whether the device is archived now' }),
  tokens_revoked: Type.Literal(true, {
    description: 'Every offline token issued to the device so far is refused on every instance',
  }),
})
