import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { ProtectCredentials } from '../mfa/fresh-mfa.js'
import { MFA_REQUIRED, OFFLINE_EXPIRES_AT, OFFLINE_TOKEN } from '../platform/openapi-examples.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { claimsOf } from '../tokens/guard.js'
import { OfflineService, type OfflineServiceDeps } from './offline.service.js'

export const OfflineTokenRequest = Type.Object(
  {
    event_id: Type.Integer(),
    device_id: Type.Optional(
      Type.Union([
        Type.String({
          minLength: 1,
          maxLength: 128,
          description:
            'The id of a registered device of the event, not archived, in canonical decimal (`"3"`); ' +
            'another form is 422 `int_parsing`, another device 404. Left out or null: a token bound to no device.',
        }),
        Type.Null(),
      ]),
    ),
  },
  { additionalProperties: false },
)

export const OfflineTokenResponse = Type.Object({
  offline_token: Type.String(),
  expires_at: Type.String({ format: 'date-time' }),
  event_id: Type.Integer(),
})

export interface OfflineRoutesDeps extends OfflineServiceDeps {
  protectCredentials: ProtectCredentials
}

export const offlineRoutes: FastifyPluginAsyncTypebox<OfflineRoutesDeps> = async (app, deps) => {
  const offline = new OfflineService(deps)
  app.post(
    '/tokens/offline',
    {
      config: perMinute(30),
      ...deps.protectCredentials({ roles: ['admin', 'operator'] }),
      schema: {
        tags: ['tokens'],
        summary: 'An offline token for a device working without a connection, bound to an event and device',
        description:
          'For administrators and operators with access to the event. Type `offline`, lifetime ' +
          'OFFLINE_TOKEN_EXPIRE_HOURS, claims rebuilt from the stored record and narrowed to the event. ' +
          "With `device_id` the token is bound to that device: it carries the device's id (canonical " +
          'decimal) and its token generation, so archiving the device, rotating its key or `wristband device ' +
          "revoke` ends it like the device's own tokens. The device must exist, not be archived and be " +
          'registered at `event_id`: 404 otherwise (one answer for the three); a `device_id` that is not an ' +
          'integer in canonical decimal (`"07"`, `"+7"`, `"POS-7"`) is 422 `int_parsing` at `body.device_id`. ' +
          "While an administrator's MFA is enabled, the access token needs a fresh `mfa_verified_at` " +
          '(403 `{"detail", "error": "mfa_required"}` otherwise).',
        security: [{ OAuth2PasswordBearer: [] }],
        body: OfflineTokenRequest,
        response: { 200: OfflineTokenResponse, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'createOfflineToken',
          request: { event_id: 1, device_id: '3' },
          returns: 'The offline token',
          response: { offline_token: OFFLINE_TOKEN, expires_at: OFFLINE_EXPIRES_AT, event_id: 1 },
          errors: MFA_REQUIRED,
        },
      },
    },
    async (request) => {
      const { event_id, device_id } = request.body
      return offline.issue(claimsOf(request), event_id, device_id, request.ip)
    },
  )
}
