import type { FastifyBaseLogger } from 'fastify'
import type { Static } from 'typebox'
import type { CheckinDirection } from '../../packages/scanner/src/checkin-rules.js'
import { insertAuditEntry } from '../audit/audit.store.js'
import { type CheckinListRow, defaultList, findList } from '../checkin/checkin-lists.store.js'
import { decideAndCount, type RefusalReason } from '../checkin/checkin-scan.service.js'
import { findEventSummary } from '../events/events.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { LocalTimeFormatter } from '../platform/formats.js'
import { traced } from '../platform/tracing.js'
import { type Claims, hasScope } from '../tokens/claims.js'
import { addCounts, checkinByNonce, type NewCheckin, recordCheckin } from '../transfers/checkins.store.js'
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

/** Where a scan was made: its check-in list and direction (docs/gate.md). */
export interface ScanPlace {
  /** The list named; absent: the event's default list. */
  listId?: number
  direction: CheckinDirection
  /** An offline scan's nonce: a scan uploaded again under it counts nothing twice. */
  nonce?: string
  /** The device refused the scan offline, for this reason: it is recorded as refused. */
  refusedOffline?: RefusalReason
}

/** Where the scan was recorded, said with every answer about one. */
export interface Placed {
  checkin_list_id: number
  direction: CheckinDirection
}

export type ScanOutcome =
  | ({
      status: 'USED'
      used_timestamp: string
      usedAt: number
      /** This accepted entry made the ticket USED (and notified its partner). */
      firstUse: boolean
    } & ScanFlags &
      Placed)
  | ({ status: 'ALREADY_USED'; used_timestamp: string; usedAt: number } & ScanFlags & Partial<Placed>)
  | ({ status: 'REFUSED'; reason: Exclude<RefusalReason, 'already_used'> } & Placed)
  | { status: 'NOT_FOUND' }
  | { status: 'NO_LIST' }
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
   * The zone an event's local times are given in: its own, or UTC for a zone the runtime's zone
   * database does not know (`Europe/Berln`, from before seeds were checked), which fails every format.
   * The use still counts (the person got in), and one error line per zone names the event so that an
   * operator corrects its zone (docs/operations.md, runbook).
   */
  private zoneOf(timeZone: string, eventId: number): string {
    try {
      this.localTime.format(0, timeZone)
      return timeZone
    } catch (err) {
      if (!(err instanceof RangeError)) throw err
      if (!this.unknownZones.has(timeZone)) {
        this.unknownZones.add(timeZone)
        this.deps.log.error(
          { event_id: eventId, timezone: timeZone },
          `event ${eventId} has the time zone "${timeZone}", which the zone database does not know: ticket uses are recorded with their local time in UTC until the event's timezone is corrected`,
        )
      }
      return 'UTC'
    }
  }

  use(
    claims: Claims,
    scopes: readonly string[],
    transferUid: string,
    scan: Scan,
    place: ScanPlace = { direction: 'entry' },
  ): Promise<ScanOutcome> {
    return traced('ticket.use', { 'ticket.channel': scan.offline ? 'offline' : 'online' }, () =>
      this.useOnce(claims, scopes, transferUid, scan, place),
    )
  }

  private async useOnce(
    claims: Claims,
    scopes: readonly string[],
    transferUid: string,
    scan: Scan,
    place: ScanPlace,
  ): Promise<ScanOutcome> {
    const { db } = this.deps
    const now = this.deps.clock.now()
    const may = (eventId: number) => scopes.some((s) => hasScope(claims, eventId, s))
    const named = place.listId === undefined ? undefined : await findList(db, place.listId)
    // A list of an event the token cannot scan at is no list to it; an archived one takes only the
    // uploads of scans made while it was live.
    if (
      place.listId !== undefined &&
      (!named || !may(named.event_id) || (named.archived_at && !scan.offline))
    )
      return { status: 'NO_LIST' }
    const t = await findTransferToUse(db, transferUid)
    if (!t) {
      if (named) await this.recordAlone(named, transferUid, 'unknown', claims, scan, place, now)
      return { status: 'NOT_FOUND' }
    }
    if (!may(t.event_id)) return { status: 'FORBIDDEN' }
    if (named && named.event_id !== t.event_id) {
      await this.recordAlone(named, transferUid, 'wrong_event', claims, scan, place, now)
      return {
        status: 'REFUSED',
        reason: 'wrong_event',
        checkin_list_id: named.id,
        direction: place.direction,
      }
    }
    const list = named ?? (await defaultList(db, t.event_id, now))
    const placed: Placed = { checkin_list_id: list.id, direction: place.direction }
    if (place.nonce !== undefined) {
      const replay = await this.replay(place.nonce, t.id)
      if (replay) return replay
    }
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
    const zone = this.zoneOf(t.timezone, t.event_id)
    const usedTimestamp = this.localTime.format(usedAt, zone)
    const outcome = await db.transaction().execute(async (tx) => {
      // Of two uploads of one nonce at once, the second waits for the first's place on the list.
      const decision = await decideAndCount(
        tx,
        {
          list,
          transferId: t.id,
          ticketType: t.ticket_uid,
          direction: place.direction,
          at: usedTimestamp,
          now: this.localTime.format(now, zone),
          ...(place.refusedOffline ? { refusedOffline: place.refusedOffline } : {}),
        },
        { timezone: zone, now },
      )
      if (place.nonce !== undefined && (await checkinByNonce(tx, place.nonce)))
        return { replayed: true as const }
      const entry = decision.accepted && place.direction === 'entry'
      // The first accepted entry of the ticket on any list makes it USED; the ledger also moves the
      // ticket to the end of the sync feed, so scanners learn of the use.
      const won = entry
        ? await markUsed(
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
        : undefined
      await recordCheckin(tx, {
        ...this.scanRow(list, transferUid, claims, scan, place, now),
        transfer_id: t.id,
        result: decision.accepted ? 'accepted' : 'refused',
        reason: decision.accepted ? null : decision.reason,
        first_use: won ? 1 : null,
        scanned_at: usedAt,
        local_at: usedTimestamp,
      })
      if (!won) return { decision, won, notified: false }
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
      return { decision, won, notified }
    })
    if ('replayed' in outcome) return (await this.replay(place.nonce!, t.id))!
    if (outcome.notified) this.deps.runDueJobs()
    const { decision, won } = outcome
    if (decision.accepted) {
      // The code flags as the UPDATE decided them, against the row as it then was.
      const { revoked_code: _revoked, unknown_code: _unknown, ...rest } = flags
      return {
        status: 'USED',
        used_timestamp: usedTimestamp,
        usedAt,
        firstUse: won !== undefined,
        ...(won ? rest : flags),
        ...(won?.revokedCode ? { revoked_code: true } : {}),
        ...(won?.unknownCode ? { unknown_code: true } : {}),
        ...placed,
      }
    }
    if (decision.reason !== 'already_used') return { status: 'REFUSED', reason: decision.reason, ...placed }
    return this.alreadyUsed(t.id, placed, flags)
  }

  /** The refusal `already_used`, with the ticket's use (the first accepted entry) as today. */
  private async alreadyUsed(transferId: number, placed: Placed, flags: ScanFlags = {}): Promise<ScanOutcome> {
    const first = await useOf(this.deps.db, transferId)
    if (first.used_timestamp === null) return { status: 'REFUSED', reason: 'error', ...placed }
    return {
      status: 'ALREADY_USED',
      used_timestamp: first.used_timestamp,
      usedAt: Number(first.used_at),
      ...flags,
      ...placed,
    }
  }

  /** The answer a scan recorded under `nonce` had (an upload sent again), or undefined when none is. */
  private async replay(nonce: string, transferId: number): Promise<ScanOutcome | undefined> {
    const r = await checkinByNonce(this.deps.db, nonce)
    if (!r) return undefined
    const placed: Placed = { checkin_list_id: r.list_id, direction: r.direction as CheckinDirection }
    if (r.transfer_id !== transferId) return { status: 'REFUSED', reason: 'error', ...placed }
    if (r.result === 'accepted')
      return {
        status: 'USED',
        used_timestamp: r.local_at,
        usedAt: Number(r.scanned_at),
        firstUse: r.first_use === 1,
        ...placed,
      }
    if (r.reason === 'already_used') return this.alreadyUsed(transferId, placed)
    return { status: 'REFUSED', reason: r.reason as Exclude<RefusalReason, 'already_used'>, ...placed }
  }

  /** What every stored scan says of who, where and how. */
  private scanRow(
    list: CheckinListRow,
    transferUid: string,
    claims: Claims,
    scan: Scan,
    place: ScanPlace,
    now: number,
  ): Omit<NewCheckin, 'transfer_id' | 'result' | 'reason' | 'first_use' | 'scanned_at' | 'local_at'> {
    return {
      event_id: list.event_id,
      list_id: list.id,
      transfer_uid: transferUid,
      direction: place.direction,
      gate: scan.gate,
      device_id:
        claims.device_id === undefined || claims.device_id === null ? null : String(claims.device_id),
      actor: `${claims.role}:${claims.sub}`,
      offline: scan.offline ? 1 : null,
      nonce: place.nonce ?? null,
      created_at: now,
    }
  }

  /**
   * A refused scan of no ticket of the list's event (`unknown`, `wrong_event`): recorded and counted on
   * the list named, at the scan's time (an upload sent again under its nonce is recorded once).
   */
  private async recordAlone(
    list: CheckinListRow,
    transferUid: string,
    reason: 'unknown' | 'wrong_event',
    claims: Claims,
    scan: Scan,
    place: ScanPlace,
    now: number,
  ): Promise<void> {
    const { db } = this.deps
    if (place.nonce !== undefined && (await checkinByNonce(db, place.nonce))) return
    const timezone = this.zoneOf(
      (await findEventSummary(db, list.event_id))?.timezone ?? 'UTC',
      list.event_id,
    )
    const at =
      scan.offline && scan.usedAt >= scan.offline.earliest && scan.usedAt <= scan.offline.latest
        ? scan.usedAt
        : now
    await db.transaction().execute(async (tx) => {
      await recordCheckin(tx, {
        ...this.scanRow(list, transferUid.slice(0, 64), claims, scan, place, now),
        transfer_id: null,
        result: 'refused',
        reason,
        first_use: null,
        scanned_at: at,
        local_at: this.localTime.format(at, timezone),
      })
      await addCounts(tx, list.id, { [`refused:${reason}`]: 1 })
    })
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
