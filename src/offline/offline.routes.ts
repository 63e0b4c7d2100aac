import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { AuditLog } from '../audit/audit.store.js'
import { eventExists } from '../events/events.store.js'
import type { Grant } from '../identities/grants.js'
import { storedGrant } from '../identities/identities.store.js'
import type { Db } from '../platform/db/database.js'
import { ForbiddenError, NotFoundError } from '../platform/errors.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { reachesEvent } from '../tokens/claims.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'

export const OfflineTokenRequest = Type.Object(
  {
    event_id: Type.Integer(),
    device_id: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 128 }), Type.Null()])),
  },
  { additionalProperties: false },
)

export const OfflineTokenResponse = Type.Object({
  offline_token: Type.String(),
  expires_at: Type.String({ format: 'date-time' }),
  event_id: Type.Integer(),
})

export interface OfflineRoutesDeps {
  db: Db
  tokens: TokenService
  audit: AuditLog
}

/**
 * The grant narrowed to one event: an offline token is bound to its event, so it carries the scopes
 * held there (directly or through "*") and nothing for other events.
 */
function forEvent(grant: Grant, eventId: number): Grant {
  const p = grant.permissions
  const scopes = [...new Set([...(p[String(eventId)] ?? []), ...(p['*'] ?? [])])]
  return { ...grant, event_ids: [eventId], permissions: { [String(eventId)]: scopes } }
}

export const offlineRoutes: FastifyPluginAsyncTypebox<OfflineRoutesDeps> = async (
  app,
  { db, tokens, audit },
) => {
  app.post(
    '/tokens/offline',
    {
      config: perMinute(30),
      ...protect(tokens, { roles: ['admin', 'operator'] }),
      schema: {
        tags: ['tokens'],
        summary: 'An offline token for a device working without a connection, bound to an event and device',
        description:
          'For administrators and operators with access to the event. Type `offline`, lifetime ' +
          'OFFLINE_TOKEN_EXPIRE_HOURS, claims rebuilt from the stored record and narrowed to the event.',
        security: [{ OAuth2PasswordBearer: [] }],
        body: OfflineTokenRequest,
        response: { 200: OfflineTokenResponse, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const claims = claimsOf(request)
      const { event_id, device_id } = request.body
      if (!reachesEvent(claims, event_id)) throw new ForbiddenError()
      if (!(await eventExists(db, event_id))) throw new NotFoundError('Event not found')
      // The token outlives the access token by days: take the grant from the record as it is now.
      const grant = await storedGrant(db, claims)
      if (!reachesEvent(grant, event_id)) throw new ForbiddenError()
      const extra = { event_id, ...(device_id == null ? {} : { device_id }) }
      const issued = tokens.issueOffline(forEvent(grant, event_id), extra)
      await audit.record({
        kind: 'offline_token_issued',
        actor: `${claims.role}:${claims.sub}`,
        ip: request.ip,
        outcome: 'success',
        detail: { event_id, device_id: device_id ?? null, jti: issued.claims.jti },
      })
      return {
        offline_token: issued.token,
        expires_at: new Date(issued.claims.exp * 1000).toISOString(),
        event_id,
      }
    },
  )
}
