import type { FileHandle } from 'node:fs/promises'
import fs from 'node:fs/promises'
import { promisify } from 'node:util'
import { brotliCompress, constants } from 'node:zlib'
import type { Db } from '../platform/db/database.js'
import { ticketsAfter } from '../transfers/transfers.store.js'
import { snapshotColumnsPage } from './feed-columns.js'

/** What a snapshot is taken of, and the file it is written to (docs/offline.md, "a shared first sync"). */
export interface SnapshotJob {
  eventId: number
  /** The feed position read before the first row: a scanner's deltas continue from it. */
  position: number
  keyIds: string[]
  /** Tickets a page holds. */
  pageSize: number
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

const brotliAsync = promisify(brotliCompress)

/**
 * Brotli at quality 4: a page is mostly random ids and digests, which no quality squeezes further
 * (quality 6 made 100,000 tickets 2.54 MB and took 3 to 6 times as long as quality 4, which makes them
 * 2.48 MB).
 */
const brotli = (identity: Buffer) =>
  brotliAsync(identity, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: 4,
      [constants.BROTLI_PARAM_SIZE_HINT]: identity.length,
    },
  })

/**
 * Writes every ticket of the event, page by page in id order, to `job.file`: each page as JSON and
 * compressed with brotli, one after the other, and reports each page as soon as it is written (a
 * scanner takes page n while page n + 1 is read). Each page is read after the feed position was:
 * every change up to that position is in the snapshot, later ones may be too, and the deltas from the
 * position bring them all. Nothing of a page is kept once it is written.
 */
export async function writeSnapshot(db: Db, job: SnapshotJob, onPage: (page: PageExtent) => void) {
  const out = await fs.open(job.file, 'r+')
  const head = { event_id: job.eventId, key_ids: job.keyIds, position: job.position }
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
    for (let after: number | null = 0; after !== null; ) {
      const rows = await ticketsAfter(db, job.eventId, after, job.pageSize + 1)
      const identity = Buffer.from(JSON.stringify(snapshotColumnsPage(head, rows, job.pageSize)))
      const next = rows.length > job.pageSize ? rows[job.pageSize - 1]!.id : null
      await writing
      writing = finish(after, next, identity)
      after = next
    }
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

/** Reads `[offset, length]` of an open file. */
export async function readExtent(file: FileHandle, [offset, length]: [number, number]): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(length)
  for (let done = 0; done < length; ) {
    const { bytesRead } = await file.read(buffer, done, length - done, offset + done)
    if (bytesRead === 0) throw new Error(`a snapshot's file ended before ${offset + length}`)
    done += bytesRead
  }
  return buffer
}
