import type { FastifyBaseLogger } from 'fastify'
import type { Static } from 'typebox'
import { insertAuditEntry } from '../audit/audit.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { LocalTimeFormatter } from '../platform/formats.js'
import { traced } from '../platform/tracing.js'
import { type Claims, hasScope } from '../tokens/claims.js'
import { findTransferToUse, flaggedCodeUses, markUsed, useOf } from '../transfers/transfers.store.js'
import type { UseNotification } from '../webhooks/notification.js'
import { queueNotification } from '../webhooks/webhooks.store.js'
import type { ScannedCode } from './scanned-code.js'

export interface TicketsServiceDeps {
  db: Db
  clock: Clock
  /** Called after a notification was committed, so it goes out without waiting for the next poll. */
  runDueJobs: () => void
  /** Where a ticket's event with a time zone the runtime does not know is reported (once per zone). */
  log: Pick<FastifyBaseLogger, 'error'>
}

/** How a use was recorded, said in the answer only when true. */
export interface ScanFlags {
  /** The device's time lay outside the accepted window: recorded at the service's time instead. */
  clock_adjusted?: true
  /** The scanned code version had been re-issued (revoked); the scan still counts. */
  revoked_code?: true
  /**
   * The scanned code was never issued for the ticket (a version above its current one, or a code that
   * does not verify as one of its codes); the scan still counts.
   */
  unknown_code?: true
}

export type ScanOutcome =
  | ({ status: 'USED'; used_timestamp: string; usedAt: number } & ScanFlags)
  | ({ status: 'ALREADY_USED'; used_timestamp: string; usedAt: number } & ScanFlags)
  | { status: 'NOT_FOUND' }
  | { status: 'FORBIDDEN' }

export interface Scan {
  /** When the ticket was scanned (epoch ms): the service's time online, the device's claimed time offline. */
  usedAt: number
  gate: string | null
  /**
   * An offline scan (use-batch): its `usedAt` is kept only inside [earliest, latest] and not before the
   * code the device held could have existed; otherwise the scan is recorded at `receivedAt`.
   */
  offline?: { claimedAt: string; earliest: number; latest: number; receivedAt: number }
  /** The version of the code the device scanned, when it said. */
  version?: number
  /**
   * The code the scan carried: checked (its version, which wins over `version`, and when it was issued),
   * or 'unknown' when it did not verify as a code of this ticket.
   */
  code?: ScannedCode | 'unknown'
}

/** Why an offline scan's time was not kept (the audit record's `reason`). */
type ClockAdjustment = { claimedAt: string; reason: 'outside_window' | 'before_code_existed' }

/** How many uses of re-issued or unknown codes the dashboard lists. */
const FLAGGED_CODE_USES_SHOWN = 50

/**
 * Ticket use: the first use wins through a conditional UPDATE (… where status <> 'USED'), so of two
 * scans at once exactly one changes the row; the use notification is written in the same transaction
 * (transactional outbox), so a USED ticket without its notification cannot exist.
 */
export class TicketsService {
  private readonly localTime = new LocalTimeFormatter()
  /** The unknown zones already reported, so a gate's scans log one line, not one each. */
  private readonly unknownZones = new Set<string>()

  constructor(private readonly deps: TicketsServiceDeps) {}

  /**
   * The use's time in the event's time zone. An event stored with a zone the runtime's zone database
   * does not know (`Europe/Berln`, from before seeds were checked) fails every format: the use still
   * counts (the person got in), its local time given in UTC, and one error line per zone names the
   * event so that an operator corrects its zone (docs/operations.md, runbook).
   */
  private localTimestamp(at: number, timeZone: string, eventId: number): string {
    try {
      return this.localTime.format(at, timeZone)
    } catch (err) {
      if (!(err instanceof RangeError)) throw err
      if (!this.unknownZones.has(timeZone)) {
        this.unknownZones.add(timeZone)
        this.deps.log.error(
          { event_id: eventId, timezone: timeZone },
          `event ${eventId} has the time zone "${timeZone}", which the zone database does not know: ticket uses are recorded with their local time in UTC until the event's timezone is corrected`,
        )
      }
      return this.localTime.format(at, 'UTC')
    }
  }

  use(claims: Claims, scopes: readonly string[], transferUid: string, scan: Scan): Promise<ScanOutcome> {
    return traced('ticket.use', { 'ticket.channel': scan.offline ? 'offline' : 'online' }, () =>
      this.useOnce(claims, scopes, transferUid, scan),
    )
  }

  private async useOnce(
    claims: Claims,
    scopes: readonly string[],
    transferUid: string,
    scan: Scan,
  ): Promise<ScanOutcome> {
    const { db } = this.deps
    const t = await findTransferToUse(db, transferUid)
    if (!t) return { status: 'NOT_FOUND' }
    if (!scopes.some((s) => hasScope(claims, t.event_id, s))) return { status: 'FORBIDDEN' }
    // A code that does not verify says nothing of its version: the scan counts as one without a version.
    const checked = typeof scan.code === 'object' ? scan.code : undefined
    const version = scan.code === 'unknown' ? undefined : (checked?.version ?? scan.version)
    const existedAt = codeExistedAt(Number(t.created_at), checked)
    const adjusted = scan.offline && clockAdjustment(scan, existedAt)
    // A claimed time a little before the code existed is the clock error the window allows for: kept
    // at the code's beginning, never before it.
    const usedAt = adjusted
      ? scan.offline!.receivedAt
      : scan.offline
        ? Math.max(scan.usedAt, existedAt)
        : scan.usedAt
    const flags: ScanFlags = {
      ...(adjusted ? { clock_adjusted: true } : {}),
      ...(version !== undefined && version < t.code_version ? { revoked_code: true } : {}),
      ...(scan.code === 'unknown' || (version !== undefined && version > t.code_version)
        ? { unknown_code: true }
        : {}),
    }
    if (t.used_timestamp !== null)
      return { status: 'ALREADY_USED', used_timestamp: t.used_timestamp, usedAt: Number(t.used_at), ...flags }

    const usedTimestamp = this.localTimestamp(usedAt, t.timezone, t.event_id)
    const now = this.deps.clock.now()
    const outcome = await db.transaction().execute(async (tx) => {
      // The ledger also moves the ticket to the end of the sync feed, so scanners learn of the use.
      const won = await markUsed(
        tx,
        { id: t.id, eventId: t.event_id },
        {
          used_at: usedAt,
          used_timestamp: usedTimestamp,
          used_gate: scan.gate,
          clockAdjusted: adjusted !== undefined,
          version,
          unknownCode: scan.code === 'unknown',
        },
      )
      if (!won) return { won, notified: false }
      // Nothing is backdated: the device's claimed time is kept in the audit log, with the use.
      if (adjusted)
        await insertAuditEntry(tx, now, {
          kind: 'ticket_use_clock_adjusted',
          actor: `${claims.role}:${claims.sub}`,
          outcome: 'success',
          detail: {
            transfer_uid: transferUid,
            device_id: claims.device_id ?? null,
            claimed_used_at: adjusted.claimedAt,
            recorded_used_at: new Date(usedAt).toISOString(),
            reason: adjusted.reason,
          },
        })
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
          used_at: new Date(usedAt).toISOString(),
          event_timezone: t.timezone,
        } satisfies Static<typeof UseNotification>))
      return { won, notified }
    })
    if (outcome.notified) this.deps.runDueJobs()
    if (outcome.won) {
      // The code flags as the UPDATE decided them, against the row as it then was.
      const { revoked_code: _revoked, unknown_code: _unknown, ...rest } = flags
      return {
        status: 'USED',
        used_timestamp: usedTimestamp,
        usedAt,
        ...rest,
        ...(outcome.won.revokedCode ? { revoked_code: true } : {}),
        ...(outcome.won.unknownCode ? { unknown_code: true } : {}),
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

/** How far a device's clock may be off (ahead of the service, or behind a code's beginning) unflagged. */
export const USED_AT_MAX_AHEAD_MS = 5 * 60_000

/**
 * When the code the device held came to exist: the ticket's creation (every code of it is younger), or,
 * when the scan carried the code itself, that version's issue; a version alone says nothing of when it
 * was issued.
 */
function codeExistedAt(createdAt: number, code: ScannedCode | undefined): number {
  return Math.max(createdAt, code?.issuedAt ?? createdAt)
}

/**
 * Whether an offline scan's claimed time cannot be kept, and why: outside [earliest, latest], or more
 * than the clock tolerance before the code the device held existed. Such a scan is recorded when the
 * service receives it; a claimed time within the tolerance before the code's beginning is moved to it.
 * Nothing is backdated before the ticket.
 */
function clockAdjustment(scan: Scan, existedAt: number): ClockAdjustment | undefined {
  const { claimedAt, earliest, latest } = scan.offline!
  if (scan.usedAt < earliest || scan.usedAt > latest) return { claimedAt, reason: 'outside_window' }
  if (scan.usedAt < existedAt - USED_AT_MAX_AHEAD_MS) return { claimedAt, reason: 'before_code_existed' }
  return undefined
}

/**
 * The latest uses of an event that were scans of a re-issued (revoked) or unknown code, for the
 * dashboard's event page: a leaked old code reached a gate before the holder's new one, which then met
 * ALREADY_USED; or a device uploaded a code the service never issued for the ticket. With `partnerIds`,
 * only the tickets of those partners (a dashboard user's: partners are isolated); none when it is empty.
 */
export function latestFlaggedCodeUses(deps: { db: Db }, eventId: number, partnerIds?: number[]) {
  return flaggedCodeUses(deps.db, eventId, FLAGGED_CODE_USES_SHOWN, partnerIds)
}
