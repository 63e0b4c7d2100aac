import type { AuditLog } from '../audit/audit.store.js'
import { tokenGenerationOf } from '../devices/devices.store.js'
import { eventExists } from '../events/events.store.js'
import type { Grant } from '../identities/grants.js'
import { storedGrant } from '../identities/identities.store.js'
import type { Db } from '../platform/db/database.js'
import { ForbiddenError, NotFoundError } from '../platform/errors.js'
import { type Claims, reachesEvent } from '../tokens/claims.js'
import type { TokenService } from '../tokens/token.service.js'

export interface OfflineServiceDeps {
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

/** Offline tokens: long-lived tokens for devices working without a connection. */
export class OfflineService {
  constructor(private readonly deps: OfflineServiceDeps) {}

  /** An offline token for the caller at one event (and device), audited. */
  async issue(claims: Claims, eventId: number, deviceId: string | null | undefined, ip: string) {
    const { db, tokens, audit } = this.deps
    if (!reachesEvent(claims, eventId)) throw new ForbiddenError()
    if (!(await eventExists(db, eventId))) throw new NotFoundError('Event not found')
    // The token outlives the access token by days: take the grant from the record as it is now.
    const grant = await storedGrant(db, claims)
    if (!reachesEvent(grant, eventId)) throw new ForbiddenError()
    // A token bound to a registered device is of the device's current token generation, so ending the
    // device's tokens (archive, key rotation, revoke) ends this one too, and one issued after is good.
    const generation =
      deviceId != null && /^[1-9]\d{0,9}$/.test(deviceId) && Number(deviceId) <= 2 ** 31 - 1
        ? await tokenGenerationOf(db, Number(deviceId))
        : undefined
    const extra = {
      event_id: eventId,
      ...(deviceId == null ? {} : { device_id: deviceId }),
      ...(generation === undefined ? {} : { device_gen: generation }),
    }
    const issued = tokens.issueOffline(forEvent(grant, eventId), extra)
    await audit.record({
      kind: 'offline_token_issued',
      actor: `${claims.role}:${claims.sub}`,
      ip,
      outcome: 'success',
      detail: { event_id: eventId, device_id: deviceId ?? null, jti: issued.claims.jti },
    })
    return {
      offline_token: issued.token,
      expires_at: new Date(issued.claims.exp * 1000).toISOString(),
      event_id: eventId,
    }
  }
}
