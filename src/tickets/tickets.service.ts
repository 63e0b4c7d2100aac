import type { Static } from 'typebox'
import { insertAuditEntry } from '../audit/audit.store.js'
import { markChanged } from '../edge/scan-sync.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { LocalTimeFormatter } from '../platform/formats.js'
import { type Claims, hasScope } from '../tokens/claims.js'
import type { UseNotification } from '../webhooks/notification.js'
import { queueNotification } from '../webhooks/webhooks.store.js'
import { findTransferToUse, markUsed, revokedCodeUses, useOf } from './tickets.store.js'

export interface TicketsServiceDeps {
  db: Db
  clock: Clock
  /** Called after a notification was committed, so it goes out without waiting for the next poll. */
  runDueJobs: () => void
}

/** How a use was recorded, said in the answer only when true. */
export interface ScanFlags {
  /** The device's time lay outside the accepted window: recorded at the service's time instead. */
  clock_adjusted?: true
  /** The scanned code version had been re-issued (revoked); the scan still counts. */
  revoked_code?: true
}

export type ScanOutcome =
  | ({ status: 'USED'; used_timestamp: string; usedAt: number } & ScanFlags)
  | ({ status: 'ALREADY_USED'; used_timestamp: string; usedAt: number } & ScanFlags)
  | { status: 'NOT_FOUND' }
  | { status: 'FORBIDDEN' }

export interface Scan {
  /** When the ticket was scanned (epoch ms), as recorded: the service's time when clockAdjusted. */
  usedAt: number
  gate: string | null
  /** The device's claimed time was outside the window; `claimedAt` is what it said. */
  clockAdjusted?: { claimedAt: string }
  /** The version of the code the device scanned, when it said. */
  version?: number
}

/** How many uses of re-issued codes the dashboard lists. */
const REVOKED_CODE_USES_SHOWN = 50

/**
 * Ticket use: the first use wins through a conditional UPDATE (… where status <> 'USED'), so of two
 * scans at once exactly one changes the row; the use notification is written in the same transaction
 * (transactional outbox), so a USED ticket without its notification cannot exist.
 */
export class TicketsService {
  private readonly localTime = new LocalTimeFormatter()

  constructor(private readonly deps: TicketsServiceDeps) {}

  async use(
    claims: Claims,
    scopes: readonly string[],
    transferUid: string,
    scan: Scan,
  ): Promise<ScanOutcome> {
    const { db } = this.deps
    const t = await findTransferToUse(db, transferUid)
    if (!t) return { status: 'NOT_FOUND' }
    if (!scopes.some((s) => hasScope(claims, t.event_id, s))) return { status: 'FORBIDDEN' }
    const flags: ScanFlags = {
      ...(scan.clockAdjusted ? { clock_adjusted: true } : {}),
      ...(scan.version !== undefined && scan.version < t.code_version ? { revoked_code: true } : {}),
    }
    if (t.used_timestamp !== null)
      return { status: 'ALREADY_USED', used_timestamp: t.used_timestamp, usedAt: Number(t.used_at), ...flags }

    const usedTimestamp = this.localTime.format(scan.usedAt, t.timezone)
    const now = this.deps.clock.now()
    const outcome = await db.transaction().execute(async (tx) => {
      const won = await markUsed(tx, t.id, {
        used_at: scan.usedAt,
        used_timestamp: usedTimestamp,
        used_gate: scan.gate,
        clockAdjusted: scan.clockAdjusted !== undefined,
        version: scan.version,
      })
      if (!won) return { won, notified: false }
      // Nothing is backdated: the device's claimed time is kept in the audit log, with the use.
      if (scan.clockAdjusted)
        await insertAuditEntry(tx, now, {
          kind: 'ticket_use_clock_adjusted',
          actor: `${claims.role}:${claims.sub}`,
          outcome: 'success',
          detail: {
            transfer_uid: transferUid,
            device_id: claims.device_id ?? null,
            claimed_used_at: scan.clockAdjusted.claimedAt,
            recorded_used_at: new Date(scan.usedAt).toISOString(),
          },
        })
      // Scanners learn of the use through the sync feed.
      await markChanged(tx, t.id, t.event_id)
      // The partner that transferred the ticket is told, and no other.
      const notified =
        t.partner_id !== null &&
        (await queueNotification(tx, now, { eventId: t.event_id, partnerId: t.partner_id }, t.id, {
          event_uid: t.uid,
          transfer_uid: transferUid,
          user_email: t.email,
          company_ticket_id: t.company_ticket_id,
          status: 'USED',
          used_timestamp: usedTimestamp,
          used_at: new Date(scan.usedAt).toISOString(),
          event_timezone: t.timezone,
        } satisfies Static<typeof UseNotification>))
      return { won, notified }
    })
    if (outcome.notified) this.deps.runDueJobs()
    if (outcome.won) {
      const { revoked_code: _readBefore, ...rest } = flags
      return {
        status: 'USED',
        used_timestamp: usedTimestamp,
        usedAt: scan.usedAt,
        ...rest,
        ...(outcome.won.revokedCode ? { revoked_code: true } : {}),
      }
    }
    const first = await useOf(db, t.id)
    return {
      status: 'ALREADY_USED',
      used_timestamp: first.used_timestamp!,
      usedAt: Number(first.used_at),
      ...flags,
    }
  }
}

/**
 * The latest uses of an event that were scans of a re-issued (revoked) code, for the dashboard's event
 * page: a leaked old code reached a gate before the holder's new one, which then met ALREADY_USED.
 */
export function latestRevokedCodeUses(deps: { db: Db }, eventId: number) {
  return revokedCodeUses(deps.db, eventId, REVOKED_CODE_USES_SHOWN)
}
