import type { AuditLog } from '../audit/audit.store.js'
import { type DeviceRecord, getDevice } from '../devices/devices.store.js'
import { eventExists } from '../events/events.store.js'
import type { Grant } from '../identities/grants.js'
import { storedGrant } from '../identities/identities.store.js'
import type { Db } from '../platform/db/database.js'
import { ForbiddenError, NotFoundError, ValidationFailed } from '../platform/errors.js'
import { isCanonicalInteger } from '../platform/validation.js'
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

/** Device ids are SQL integers (32 bits on PostgreSQL): a larger one names no device and is not looked up. */
const MAX_DEVICE_ID = 2 ** 31 - 1

/**
 * The device `device_id` names for a token of the event: a string holding the device's id in canonical
 * decimal (`0` or `[1-9][0-9]*`; another form, `"07"`, `"+7"`, `"7.0"`, a label, is 422 int_parsing, as
 * for integers in paths), of a device that exists, is not archived and is registered at the event (404
 * otherwise, one answer for the three, so devices of events the caller does not reach stay unseen).
 */
async function deviceAt(db: Db, deviceId: string, eventId: number): Promise<DeviceRecord> {
  if (!isCanonicalInteger(deviceId))
    throw new ValidationFailed([
      {
        loc: ['body', 'device_id'],
        msg: 'Input should be a valid integer, unable to parse string as an integer',
        type: 'int_parsing',
        input: deviceId.length > 100 ? `${deviceId.slice(0, 100)}…` : deviceId,
      },
    ])
  const id = Number(deviceId)
  const device = id <= MAX_DEVICE_ID ? await getDevice(db, id) : undefined
  if (!device || device.archived || device.event_id !== eventId)
    throw new NotFoundError('No such device at this event')
  return device
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
    // A token bound to a device names a registered one, by its canonical id and with its current token
    // generation: ending the device's tokens (archive, key rotation, revoke) then ends this one too, and
    // the device's first-sync budget is the device's. The device row is read once, so an archive that
    // commits after this read revoked the generation the token carries.
    const device = deviceId == null ? undefined : await deviceAt(db, deviceId, eventId)
    const extra = {
      event_id: eventId,
      ...(device === undefined ? {} : { device_id: String(device.id), device_gen: device.token_generation }),
    }
    const issued = tokens.issueOffline(forEvent(grant, eventId), extra)
    await audit.record({
      kind: 'offline_token_issued',
      actor: `${claims.role}:${claims.sub}`,
      ip,
      outcome: 'success',
      detail: { event_id: eventId, device_id: device?.id ?? null, jti: issued.claims.jti },
    })
    return {
      offline_token: issued.token,
      expires_at: new Date(issued.claims.exp * 1000).toISOString(),
      event_id: eventId,
    }
  }
}
