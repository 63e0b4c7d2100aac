import type { FileHandle } from 'node:fs/promises'
import fs from 'node:fs/promises'
import { setImmediate } from 'node:timers/promises'
import { promisify } from 'node:util'
import { brotliCompress, constants } from 'node:zlib'
import type { Db, Dialect } from '../platform/db/database.js'
import {
  eventTickets,
  type GatheredTickets,
  ticketColumnsAfter,
  ticketTypeUids,
} from '../transfers/transfers.store.js'
import {
  type ColumnsPage,
  DIGEST_CHARS,
  gatheredColumns,
  gatheredColumnsPage,
  NO_DIGEST,
  snapshotColumnsPage,
} from './feed-columns.js'

const DIGEST = { chars: DIGEST_CHARS, missing: NO_DIGEST }

/** What a snapshot is taken of, and the file it is written to (docs/offline.md, "a shared first sync"). */
export interface SnapshotJob {
  eventId: number
  /** The feed position read before the first row: a scanner's deltas continue from it. */
  position: number
  keyIds: string[]
  /** Tickets a page holds. */
  pageSize: number
  /**
   * Tickets PostgreSQL gathers in one query while the service is busy (`writeSnapshot`): a page is then
   * read in a few shorter queries.
   */
  busyStep: number
  /** An empty file, made by the caller (who opens it to read the pages as they are written). */
  file: string
}

/** What the build's child process is sent (`snapshot-process.ts`): the job and the database to open. */
export interface SnapshotProcessJob extends SnapshotJob {
  databaseUrl: string
  schema: string
}

/** Where a page of a snapshot lies in its file: `[offset, length]` of each encoding. */
export interface PageExtent {
  /** The transfer id the page starts after (the `.id` part of the cursor that asks for it). */
  after: number
  /** The id the next page starts after; null on the last page. */
  next: number | null
  identity: [number, number]
  br: [number, number]
}

/**
 * What a build's child process tells the service: a page it wrote, or that it would read on once the
 * service answers no request (answered with `BuildGo`, at the latest after the service's cap).
 */
export type BuildMessage = PageExtent | { quiet: true }

/** The service's answer to a build's `{ quiet: true }`; `busy`: it answered requests lately. */
export interface BuildGo {
  go: true
  busy: boolean
}

const brotliAsync = promisify(brotliCompress)

/**
 * Brotli at quality 2: a page is mostly random ids and digests, which no quality squeezes further. On a
 * million tickets' pages, quality 2 made 124.6 KB a page in 1.1 ms, quality 4 124.4 KB in 1.8 ms
 * (quality 6 took 3 to 6 times as long as 4, and made more). The output is taken in one chunk: zlib's
 * default of 16 KB made eight trips to its thread a page (a page's CPU 2.2 ms instead of 2.8 ms).
 */
const brotli = (identity: Buffer) =>
  brotliAsync(identity, {
    chunkSize: Math.max(identity.length, constants.Z_MIN_CHUNK),
    params: {
      [constants.BROTLI_PARAM_QUALITY]: 2,
      [constants.BROTLI_PARAM_SIZE_HINT]: identity.length,
    },
  })

/** The database a snapshot is read from. */
export interface SnapshotSource {
  db: Db
  dialect: Dialect
}

/** Two stretches of an event's tickets gathered by the database, the second right after the first, as one. */
function joined(a: GatheredTickets, b: GatheredTickets): GatheredTickets {
  if (b.count === 0) return { ...a, more: false }
  return {
    count: a.count + b.count,
    more: b.more,
    last: b.last,
    ids: a.ids + b.ids,
    digests: a.digests + b.digests,
    tickets: `${a.tickets},${b.tickets}`,
    gates: [...a.gates, ...b.gates],
  }
}

/**
 * A page of an event's tickets gathered by PostgreSQL (`ticketColumnsAfter`), each query once `pause`
 * resolved: the whole page in one query while the service is quiet, `job.busyStep` tickets a query
 * while it is busy. A page's query takes the database server's CPU for about 17 ms (1M tickets, 5,000
 * a page), at the database's priority, beside the ticket uses' transactions; a step's takes a fifth of
 * that, and the next step waits for the service again.
 */
async function gatherPage(
  db: Db,
  job: SnapshotJob,
  after: number,
  pause: () => Promise<boolean>,
): Promise<GatheredTickets> {
  let page: GatheredTickets | undefined
  for (;;) {
    const busy = await pause()
    const left = job.pageSize - (page?.count ?? 0)
    const from = page ? page.last! : after
    const part = await ticketColumnsAfter(
      db,
      job.eventId,
      from,
      busy ? Math.min(job.busyStep, left) : left,
      DIGEST,
    )
    page = page ? joined(page, part) : part
    if (!page.more || page.count === job.pageSize) return page
  }
}

/**
 * The pages of an event's tickets in id order, `pageSize` each, encoded: `onPage` is handed each page's
 * JSON, the id it starts after and the id the next one starts after (null on the last; an event without
 * tickets has one empty page). PostgreSQL gathers a page into a few strings (`ticketColumnsAfter`): one
 * row a page to parse instead of one a ticket. SQLite, whose reads are calls into this process, reads
 * the rows.
 */
async function eachPage(
  source: SnapshotSource,
  job: SnapshotJob,
  onPage: (after: number, next: number | null, identity: Buffer) => Promise<void>,
  pause: () => Promise<boolean>,
): Promise<void> {
  const { db } = source
  const head = { event_id: job.eventId, key_ids: job.keyIds, position: job.position }
  let types = await ticketTypeUids(db, job.eventId)
  /** A ticket type made after the event's types were read is read then. */
  const known = async (ids: Iterable<number>) => {
    for (const id of ids) if (!types.has(id)) types = await ticketTypeUids(db, job.eventId)
  }
  const typeOf = (id: number) => types.get(id)!
  /** PostgreSQL's next page, asked for as soon as the page before it came, before that one is encoded. */
  let gathering: Promise<GatheredTickets> | undefined
  for (let after: number | null = 0; after !== null; ) {
    let page: ColumnsPage
    let next: number | null
    if (source.dialect === 'postgres') {
      const gathered: GatheredTickets = await (gathering ?? gatherPage(db, job, after, pause))
      next = gathered.more ? gathered.last : null
      // The database gathers the next page while this one is encoded here.
      gathering = next === null ? undefined : gatherPage(db, job, next, pause)
      gathering?.catch(() => {}) // observed when awaited; this page's own failure comes first
      // Its query leaves first: reaching the socket takes it a few promise turns (the go, Kysely, pg),
      // which would otherwise wait for this page's encoding (1-2 ms a page, 0.4 s of a million's build).
      await setImmediate()
      const columns = gatheredColumns(gathered)
      await known(columns.typeIds)
      page = gatheredColumnsPage(head, gathered, columns, typeOf)
    } else {
      // Read in the build's own process (SQLite's reads are calls into it), at its lower priority.
      await pause()
      const rows = await eventTickets(db, job.eventId)
        .where('t.id', '>', after)
        .limit(job.pageSize + 1)
        .execute()
      await known(rows.map((r) => r.ticket_type_id))
      page = snapshotColumnsPage(head, rows, job.pageSize, (r) => typeOf(r.ticket_type_id))
      next = rows.length > job.pageSize ? rows[job.pageSize - 1]!.id : null
    }
    await onPage(after, next, Buffer.from(JSON.stringify(page)))
    after = next
  }
}

/**
 * `pause` asked one read ahead while the service is quiet: the next read's answer comes while this one
 * runs, instead of between them. Once an answer says busy, each read asks right before it again; the
 * read after the service turned busy is the only one that goes on an answer from before.
 */
function askedAhead(pause: () => Promise<boolean>): () => Promise<boolean> {
  let ahead: Promise<boolean> | undefined
  return async () => {
    const busy = await (ahead ?? pause())
    ahead = busy ? undefined : pause()
    return busy
  }
}

/**
 * Writes every ticket of the event, page by page in id order, to `job.file`: each page as JSON and
 * compressed with brotli, one after the other, and reports each page as soon as it is written (a
 * scanner takes page n while page n + 1 is read). Each read waits for `pause`, which resolves once the
 * service answers no request (or waited long enough) with whether it is busy: the gate's requests come
 * first (`RequestPrecedence.quiet`). Each page is read after the feed position was:
 * every change up to that position is in the snapshot, later ones may be too, and the deltas from the
 * position bring them all. Nothing of a page is kept once it is written.
 */
export async function writeSnapshot(
  source: SnapshotSource,
  job: SnapshotJob,
  onPage: (page: PageExtent) => void,
  pause: () => Promise<boolean> = async () => false,
) {
  const out = await fs.open(job.file, 'r+')
  let offset = 0
  /** Compresses and writes one page (on zlib's threads, while the next page is read), then reports it. */
  const finish = async (after: number, next: number | null, identity: Buffer) => {
    const br = await brotli(identity)
    const at = offset
    offset += identity.length + br.length
    await writeAll(out, identity, at)
    await writeAll(out, br, at + identity.length)
    onPage({ after, next, identity: [at, identity.length], br: [at + identity.length, br.length] })
  }
  try {
    let writing: Promise<void> | undefined
    await eachPage(
      source,
      job,
      async (after, next, identity) => {
        await writing
        writing = finish(after, next, identity)
      },
      askedAhead(pause),
    )
    await writing
  } finally {
    await out.close()
  }
}

/** Writes `data` at `position` of an open file. */
export async function writeAll(out: FileHandle, data: Buffer, position: number): Promise<void> {
  for (let done = 0; done < data.length; ) {
    const { bytesWritten } = await out.write(data, done, data.length - done, position + done)
    done += bytesWritten
  }
}

/** Reads `[offset, length]` of an open file, into `into` when given (a buffer of at least `length` bytes). */
export async function readExtent(
  file: FileHandle,
  [offset, length]: [number, number],
  into?: Buffer,
): Promise<Buffer> {
  const buffer = into ? into.subarray(0, length) : Buffer.allocUnsafe(length)
  for (let done = 0; done < length; ) {
    const { bytesRead } = await file.read(buffer, done, length - done, offset + done)
    if (bytesRead === 0) throw new Error(`a snapshot's file ended before ${offset + length}`)
    done += bytesRead
  }
  return buffer
}
