import { LRUCache } from 'lru-cache'
import { feedLists } from '../checkin/checkin.service.js'
import { feedPosition } from '../events/events.store.js'
import type { Partner } from '../partner/partner-auth.js'
import type { Clock } from '../platform/clock.js'
import type { Config } from '../platform/config.js'
import type { Db } from '../platform/db/database.js'
import {
  ConflictError,
  NotFoundError,
  PayloadTooLargeError,
  ServiceUnavailableError,
  TooManyRequestsError,
} from '../platform/errors.js'
import type { RequestPrecedence } from '../platform/precedence.js'
import {
  feedPage,
  findTransferForReissue,
  hasMoreTicketsThan,
  replaceCode,
  ticketsAfter,
} from '../transfers/transfers.store.js'
import type { EdgeKeys } from './edge-keys.js'
import { type ColumnsPage, columnsPage, feedRowType, snapshotColumnsPage } from './feed-columns.js'
import { type HeldPage, type SnapshotEncoding, Snapshots } from './snapshots.js'
import type { TicketCodes } from './ticket-codes.js'

export { SNAPSHOT_IDLE_MS } from './snapshots.js'

/** The most tickets one feed page holds (the default page). */
export const FEED_PAGE_SIZE = 5000

export interface EdgeServiceDeps {
  db: Db
  clock: Clock
  keys: EdgeKeys
  codes: TicketCodes
  config: Pick<Config, 'DATA_DIR' | 'databaseUrl' | 'DATABASE_SCHEMA' | 'SCAN_SYNC_JSON_MAX_TICKETS'>
  /** The instance's requests, which a snapshot's build reads its pages between (none: it does not wait). */
  precedence?: RequestPrecedence
}

/**
 * A page of a first-sync snapshot as stored: JSON, or compressed once for every scanner; its buffer is
 * given back with `release` once the answer was handed to the socket.
 */
export interface SnapshotPage extends HeldPage {
  encoding: SnapshotEncoding | undefined
}

/**
 * The longest a snapshot's build waits for the instance's requests before each read: the scans at the
 * gate run beside no build's query when they can (its database reads take the database server's CPU at
 * its own priority, which the build's lower one does not reach), and a build of 1,000,000 tickets (1,000
 * reads of 1,000 while the gate is busy) takes at most 50 s longer however busy the gates are.
 */
const BUILD_YIELDS_AT_MOST_MS = 50

/** A device may start this many first syncs per window (a scanner restarting in a loop cannot hog the service). */
export const FIRST_SYNCS_PER_DEVICE = 10
const FIRST_SYNC_WINDOW_MS = 10 * 60_000

/** Offline at the gate: the scanner sync feed and the re-issue of a ticket code. */
export class EdgeService {
  /** The first-sync snapshots, built off the request path and kept in files. */
  private readonly snapshots: Snapshots
  /** First syncs started per device in the current window. */
  private readonly firstSyncs = new LRUCache<string, { count: number; since: number }>({ max: 50_000 })

  constructor(private readonly deps: EdgeServiceDeps) {
    const { db, clock, config, keys, precedence } = deps
    this.snapshots = new Snapshots({
      db,
      clock,
      databaseUrl: config.databaseUrl,
      schema: config.DATABASE_SCHEMA,
      dataDir: config.DATA_DIR,
      keyIds: () => keys.keys.map((k) => k.kid),
      pageSize: FEED_PAGE_SIZE,
      ...(precedence ? { quiet: () => precedence.quiet(BUILD_YIELDS_AT_MOST_MS) } : {}),
    })
  }

  /** Ends the snapshot builds and deletes their files. */
  close(): Promise<void> {
    return this.snapshots.close()
  }

  /**
   * Counts a first sync of `device` (a device id, or the token's subject); 429 past the limit. Kept per
   * instance: a fleet of n instances lets a device start at most n times as many.
   */
  countFirstSync(device: string): void {
    const now = this.deps.clock.now()
    const entry = this.firstSyncs.get(device)
    if (!entry || now - entry.since >= FIRST_SYNC_WINDOW_MS) {
      this.firstSyncs.set(device, { count: 1, since: now })
      return
    }
    entry.count++
    if (entry.count > FIRST_SYNCS_PER_DEVICE)
      throw new TooManyRequestsError(
        FIRST_SYNCS_PER_DEVICE,
        Math.ceil((entry.since + FIRST_SYNC_WINDOW_MS - now) / 1000),
        'Too many first syncs from this device: continue from the last cursor',
      )
  }

  /**
   * A page of the compact feed (`format=columns`). Without a cursor: the first page of the event's
   * shared snapshot (encoded and compressed once, read from its file in `encoding`); with a snapshot
   * cursor `position.id`: the page after that transfer id, from the snapshot when it is still the one
   * taken at `position`, else read now (still correct: the last page hands out `position`, and the
   * deltas from there cover every change since); with a plain position: the changes after it. A page
   * of a first sync is read once `turn` resolved (called at most once).
   */
  async columns(
    eventId: number,
    cursor: string | undefined,
    limit: number,
    encoding: SnapshotEncoding | undefined,
    turn: () => Promise<void> = async () => {},
  ): Promise<ColumnsPage | SnapshotPage> {
    const { db, keys, clock } = this.deps
    const key_ids = keys.keys.map((k) => k.kid)
    if (cursor === undefined || cursor.includes('.')) {
      const [position, after] =
        cursor === undefined ? [undefined, 0] : (cursor.split('.').map(Number) as [number, number])
      if (limit === FEED_PAGE_SIZE) {
        const held = await this.snapshots.page(eventId, position, after, encoding, turn)
        if (held) return { ...held, encoding }
      }
      const now = position ?? (await feedPosition(db, eventId))
      if (now === undefined) throw new NotFoundError('Event not found')
      // Unless the snapshot gave it already (its page was then let go meanwhile).
      await turn()
      const rows = await ticketsAfter(db, eventId, after, limit + 1)
      return snapshotColumnsPage({ event_id: eventId, key_ids, position: now }, rows, limit, feedRowType)
    }
    // The event's lists as they are now, with every page of changes (a first sync ends with one).
    const lists = await feedLists(db, eventId, clock.now())
    if (!lists) throw new NotFoundError('Event not found')
    const rows = await feedPage(db, eventId, Number(cursor), limit + 1)
    const page = rows.slice(0, limit)
    return {
      ...columnsPage(
        {
          event_id: eventId,
          key_ids,
          cursor: String(page.length ? Number(page[page.length - 1]!.feed_seq) : cursor),
          has_more: rows.length > limit,
        },
        page,
        feedRowType,
      ),
      ...lists,
    }
  }

  /**
   * The event's tickets changed after `cursor`, at most `limit`, and the cursor of the next page; from
   * 0 (a full sync) only for an event of at most SCAN_SYNC_JSON_MAX_TICKETS tickets.
   */
  async feed(eventId: number, cursor: number, limit: number) {
    const { db, keys, clock, config } = this.deps
    const lists = await feedLists(db, eventId, clock.now())
    if (!lists) throw new NotFoundError('Event not found')
    // A full sync of the object form is about 200 bytes a ticket, built page by page for each scanner:
    // above the limit scanners take the compact form, whose snapshot every scanner shares.
    const max = config.SCAN_SYNC_JSON_MAX_TICKETS
    if (cursor === 0 && (await hasMoreTicketsThan(db, eventId, max)))
      throw new PayloadTooLargeError(
        `The event has more than ${max} tickets: take its first sync with format=columns (docs/offline.md)`,
        'full_sync_too_large',
      )
    const rows = await feedPage(db, eventId, cursor, limit + 1)
    const page = rows.slice(0, limit)
    return {
      event_id: eventId,
      key_ids: keys.keys.map((k) => k.kid),
      tickets: page.map((r) => ({
        transfer_uid: r.transfer_uid,
        ticket_uid: r.ticket_uid,
        change:
          r.used_timestamp !== null
            ? ('used' as const)
            : r.code_version > 1
              ? ('revoked' as const)
              : ('new' as const),
        version: r.code_version,
        digest: r.code_digest,
        used_timestamp: r.used_timestamp,
        used_at: r.used_at === null ? null : new Date(Number(r.used_at)).toISOString(),
        used_gate: r.used_gate,
      })),
      cursor: String(page.length ? Number(page[page.length - 1]!.feed_seq) : cursor),
      has_more: rows.length > limit,
      ...lists,
    }
  }

  /** A new code for a partner's transfer; the previous versions are revoked. A used ticket keeps its code. */
  async reissue(partner: Partner, companyTicketId: string) {
    const { db, codes, clock } = this.deps
    const t = await findTransferForReissue(db, partner.partnerId, companyTicketId)
    if (!t) throw new NotFoundError('No transfer with this company_ticket_id')
    if (!codes.enabled) throw new ServiceUnavailableError('The service has no edge signing key')
    const used = () =>
      new ConflictError('A used ticket keeps its code', 'already_used', {
        used_timestamp: t.used_timestamp,
        used_at: t.used_at === null ? null : new Date(Number(t.used_at)).toISOString(),
      })
    if (t.used_timestamp !== null) throw used()
    const code = (await codes.issue({
      eventId: partner.eventId,
      transferUid: t.uid,
      ticketUid: t.ticket_uid,
      version: t.code_version + 1,
      issuedAt: clock.now(),
      ticketDate: t.ticket_date,
    }))!
    const next = { id: t.id, eventId: partner.eventId, fromVersion: t.code_version }
    // The new code and its sync-feed position commit together.
    if (!(await db.transaction().execute((tx) => replaceCode(tx, next, code))))
      throw new ConflictError('The ticket was used or re-issued meanwhile', 'concurrent_change')
    return {
      transfer_uid: t.uid,
      company_ticket_id: companyTicketId,
      code_version: t.code_version + 1,
      ticket_code: code.code,
    }
  }
}
