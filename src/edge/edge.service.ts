import { promisify } from 'node:util'
import { brotliCompress, constants, gzip } from 'node:zlib'
import { LRUCache } from 'lru-cache'
import { feedLists } from '../checkin/checkin.service.js'
import { feedPosition } from '../events/events.store.js'
import type { Partner } from '../partner/partner-auth.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import {
  ConflictError,
  NotFoundError,
  ServiceUnavailableError,
  TooManyRequestsError,
} from '../platform/errors.js'
import {
  type FeedRow,
  feedPage,
  findTransferForReissue,
  replaceCode,
  ticketsAfter,
} from '../transfers/transfers.store.js'
import type { EdgeKeys } from './edge-keys.js'
import { type ColumnsPage, columnsPage } from './feed-columns.js'
import type { TicketCodes } from './ticket-codes.js'

/** The most tickets one feed page holds (the default page). */
export const FEED_PAGE_SIZE = 5000

export interface EdgeServiceDeps {
  db: Db
  clock: Clock
  keys: EdgeKeys
  codes: TicketCodes
}

/** A page of a first-sync snapshot, encoded once and compressed once per encoding for every scanner. */
export interface SnapshotPage {
  /** The transfer id the page starts after (the `.id` part of the cursor that asks for it). */
  after: number
  identity: Buffer
  /** The page compressed: brotli is made while the snapshot is built, gzip when first asked for. */
  encoded(encoding: 'br' | 'gzip'): Promise<Buffer>
}

interface Snapshot {
  /** The feed position the snapshot was taken at: a scanner's deltas continue from it. */
  position: number
  /** When a scanner last asked for it (the service's clock): an idle snapshot is let go. */
  askedAt: number
  /**
   * The pages by the transfer id they start after. A page is listed as soon as the page before it was
   * read, so a scanner takes page n while page n + 1 is being built.
   */
  pages: Map<number, Promise<SnapshotPage>>
}

/**
 * A first sync is shared: the snapshot of an event taken at a feed position is reused by every scanner
 * whose first sync starts while the feed has moved less than this many changes past it (the scanner
 * then catches up with a delta of at most that size). A busier event gets a new snapshot.
 */
const SNAPSHOT_REUSE_CHANGES = 5000
/**
 * A snapshot no scanner asked for in this long is let go (100,000 tickets hold about 7 MB): the next
 * first sync builds a new one.
 */
export const SNAPSHOT_IDLE_MS = 10 * 60_000
/** A device may start this many first syncs per window (a scanner restarting in a loop cannot hog the service). */
export const FIRST_SYNCS_PER_DEVICE = 10
const FIRST_SYNC_WINDOW_MS = 10 * 60_000

/** Rows a snapshot build reads at once (see `pageOfTickets`). */
const SNAPSHOT_READ_SLICE = 1000

/** Lets the event loop serve what waits (I/O, timers) before going on. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve))

const gzipAsync = promisify(gzip)
const brotliAsync = promisify(brotliCompress)

/**
 * A snapshot page, compressed off the event loop (zlib's thread pool), each encoding once. Brotli at
 * quality 4: a page is mostly random ids and digests, which no quality squeezes further (quality 6 made
 * 100,000 tickets 2.54 MB and took 3 to 6 times as long as quality 4, which makes them 2.48 MB).
 */
function snapshotPageOf(after: number, json: string): SnapshotPage {
  const identity = Buffer.from(json)
  const made = new Map<'br' | 'gzip', Promise<Buffer>>()
  const encoded = (encoding: 'br' | 'gzip') => {
    let done = made.get(encoding)
    if (!done) {
      done =
        encoding === 'gzip'
          ? gzipAsync(identity, { level: 6 })
          : brotliAsync(identity, {
              params: {
                [constants.BROTLI_PARAM_QUALITY]: 4,
                [constants.BROTLI_PARAM_SIZE_HINT]: identity.length,
              },
            })
      made.set(encoding, done)
    }
    return done
  }
  return { after, identity, encoded }
}

/** Offline at the gate: the scanner sync feed and the re-issue of a ticket code. */
export class EdgeService {
  /** The latest first-sync snapshot of each event (scanners starting together share one build). */
  private readonly snapshots = new Map<number, Snapshot>()
  /** First syncs started per device in the current window. */
  private readonly firstSyncs = new LRUCache<string, { count: number; since: number }>({ max: 50_000 })

  constructor(private readonly deps: EdgeServiceDeps) {}

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
   * shared snapshot (pre-encoded and compressed); with a snapshot cursor `position.id`: the page after
   * that transfer id, from the snapshot when it is still the one taken at `position`, else read now
   * (still correct: the last page hands out `position`, and the deltas from there cover every change
   * since); with a plain position: the changes after it.
   */
  async columns(
    eventId: number,
    cursor: string | undefined,
    limit: number,
  ): Promise<ColumnsPage | SnapshotPage> {
    const { db, keys } = this.deps
    const key_ids = keys.keys.map((k) => k.kid)
    if (cursor === undefined || cursor.includes('.')) {
      const [position, after] =
        cursor === undefined ? [undefined, 0] : (cursor.split('.').map(Number) as [number, number])
      if (limit === FEED_PAGE_SIZE) {
        const snapshot = await this.snapshot(eventId, position)
        const page = snapshot?.pages.get(after)
        if (page) return page
      }
      const now = position ?? (await feedPosition(db, eventId))
      if (now === undefined) throw new NotFoundError('Event not found')
      const rows = await ticketsAfter(db, eventId, after, limit + 1)
      return this.snapshotPage(eventId, key_ids, now, rows, limit)
    }
    const now = this.forgetIdleSnapshots()
    // The event's lists as they are now, with every page of changes (a first sync ends with one).
    const lists = await feedLists(db, eventId, now)
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
      ),
      ...lists,
    }
  }

  private snapshotPage(eventId: number, key_ids: string[], position: number, rows: FeedRow[], limit: number) {
    const page = rows.slice(0, limit)
    const more = rows.length > limit
    return columnsPage(
      {
        event_id: eventId,
        key_ids,
        cursor: more ? `${position}.${page[page.length - 1]!.id}` : String(position),
        has_more: more,
      },
      page,
    )
  }

  /**
   * The snapshot to serve: for a first sync (no position) the latest one unless the feed moved too far
   * past it (then a new one, built once however many scanners ask at the same moment); for a
   * continuation the one taken at `position`, if it is still held. Snapshots idle for
   * `SNAPSHOT_IDLE_MS` are let go first.
   */
  private async snapshot(eventId: number, position: number | undefined): Promise<Snapshot | undefined> {
    const asked = this.forgetIdleSnapshots()
    const chosen = await this.chooseSnapshot(eventId, position, asked)
    if (chosen) chosen.askedAt = asked
    return chosen
  }

  /** Lets go of the snapshots no scanner asked for in `SNAPSHOT_IDLE_MS` (on every sync request); returns now. */
  private forgetIdleSnapshots(): number {
    const now = this.deps.clock.now()
    for (const [id, held] of this.snapshots)
      if (now - held.askedAt >= SNAPSHOT_IDLE_MS) this.snapshots.delete(id)
    return now
  }

  private async chooseSnapshot(eventId: number, position: number | undefined, asked: number) {
    if (position !== undefined) {
      const held = this.snapshots.get(eventId)
      return held?.position === position ? held : undefined
    }
    const now = await feedPosition(this.deps.db, eventId)
    if (now === undefined) throw new NotFoundError('Event not found')
    // Read after the await: a build another request started meanwhile is shared.
    const latest = this.snapshots.get(eventId)
    if (latest && now - latest.position <= SNAPSHOT_REUSE_CHANGES) return latest
    const snapshot = this.buildSnapshot(eventId, now, asked)
    this.snapshots.set(eventId, snapshot)
    return snapshot
  }

  /**
   * Every ticket of the event, read page by page in id order after the feed position was read: each
   * change up to that position is visible (positions become visible in order), later ones may be too,
   * and the deltas from the position bring them all. Pages are listed as they are read; a build that
   * fails is forgotten (its scanners' next request starts a new one).
   */
  private buildSnapshot(eventId: number, position: number, askedAt: number): Snapshot {
    const key_ids = this.deps.keys.keys.map((k) => k.kid)
    const snapshot: Snapshot = { position, askedAt, pages: new Map() }
    const listed = (after: number) => {
      let resolve!: (page: SnapshotPage) => void
      let reject!: (err: unknown) => void
      const promise = new Promise<SnapshotPage>((res, rej) => {
        resolve = res
        reject = rej
      })
      promise.catch(() => {}) // a page nobody asked for may fail unobserved
      snapshot.pages.set(after, promise)
      return { resolve, reject }
    }
    let next = listed(0)
    const build = async () => {
      let after = 0
      for (;;) {
        const rows = await this.pageOfTickets(eventId, after)
        const json = JSON.stringify(this.snapshotPage(eventId, key_ids, position, rows, FEED_PAGE_SIZE))
        const page = snapshotPageOf(after, json)
        const compressing = page.encoded('br')
        const current = next
        const more = rows.length > FEED_PAGE_SIZE
        if (more) {
          after = rows[FEED_PAGE_SIZE - 1]!.id
          next = listed(after)
        }
        current.resolve(page)
        if (!more) return
        // One page compressing at a time, and the event loop free meanwhile: the scanners take this
        // page, and a ticket use at the gate waits for no more than a slice of reading (a failure is
        // the page's own: its request answers it).
        await compressing.catch(() => {})
      }
    }
    build().catch((err: unknown) => {
      next.reject(err)
      if (this.snapshots.get(eventId) === snapshot) this.snapshots.delete(eventId)
    })
    return snapshot
  }

  /**
   * The tickets of a snapshot page and the first of the next (to know whether one follows), read in
   * slices with a turn of the event loop between them: SQLite answers synchronously, and a ticket use
   * at the gate should not wait for 5,000 rows to be read.
   */
  private async pageOfTickets(eventId: number, after: number): Promise<FeedRow[]> {
    const rows: FeedRow[] = []
    let from = after
    for (;;) {
      const want = Math.min(SNAPSHOT_READ_SLICE, FEED_PAGE_SIZE + 1 - rows.length)
      const slice = await ticketsAfter(this.deps.db, eventId, from, want)
      rows.push(...slice)
      if (slice.length < want || rows.length > FEED_PAGE_SIZE) return rows
      from = slice[slice.length - 1]!.id
      await nextTurn()
    }
  }

  /** The event's tickets changed after `cursor`, at most `limit`, and the cursor of the next page. */
  async feed(eventId: number, cursor: number, limit: number) {
    const { db, keys } = this.deps
    const now = this.forgetIdleSnapshots()
    const lists = await feedLists(db, eventId, now)
    if (!lists) throw new NotFoundError('Event not found')
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
    if (!(await replaceCode(db, { id: t.id, eventId: partner.eventId, fromVersion: t.code_version }, code)))
      throw new ConflictError('The ticket was used or re-issued meanwhile', 'concurrent_change')
    return {
      transfer_uid: t.uid,
      company_ticket_id: companyTicketId,
      code_version: t.code_version + 1,
      ticket_code: code.code,
    }
  }
}
