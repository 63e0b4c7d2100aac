import { fork } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import type { FileHandle } from 'node:fs/promises'
import fs from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { gzip } from 'node:zlib'
import { feedPosition } from '../events/events.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { NotFoundError } from '../platform/errors.js'
import { deleteLeftovers, markInUse } from '../platform/leftovers.js'
import { PageBuffers } from './page-buffers.js'
import {
  type BuildGo,
  type BuildMessage,
  type PageExtent,
  readExtent,
  type SnapshotJob,
  type SnapshotProcessJob,
  writeAll,
  writeSnapshot,
} from './snapshot-file.js'

/** The encodings a snapshot page is stored in besides its JSON. */
export type SnapshotEncoding = 'br' | 'gzip'

/**
 * A first sync is shared: the snapshot of an event taken at a feed position is reused by every scanner
 * whose first sync starts while the feed has moved less than this many changes past it (the scanner
 * then catches up with a delta of at most that size). A busier event gets a new snapshot.
 */
const SNAPSHOT_REUSE_CHANGES = 5000
/**
 * A snapshot no scanner asked for in this long is let go (its files deleted): the next first sync
 * builds a new one.
 */
export const SNAPSHOT_IDLE_MS = 10 * 60_000
/**
 * How often idle snapshots are looked for besides each first sync's own look, and the instance's folder
 * is marked as in use (its mtime) while the folders of instances that did not stop are looked for.
 */
const SWEEP_MS = 60_000
/**
 * A sibling's folder not marked in this long is a leftover of an instance that ended without deleting it
 * (kill -9, a crash): deleted at start and on each sweep. Generous: a running instance marks its own every
 * SWEEP_MS, and instances sharing a DATA_DIR over a network may see clocks a little apart.
 */
const LEFTOVER_AFTER_MS = 10 * SWEEP_MS
/**
 * Builds running at once, each a child process with a database connection of its own: a principal with
 * scan rights on many events cannot start one per event at the same moment. Past it, a first sync of
 * another event reads its pages from the database (still right; just not shared).
 */
const MAX_BUILDS = 4
/**
 * A build's child that writes no page in this long is stuck (a connection that never answers): it is
 * ended, and the scanners waiting for its pages read them from the database. A page takes well under a
 * second; the first one includes the child's start.
 */
const BUILD_PAGE_TIMEOUT_MS = 60_000

/**
 * Tickets a build reads in one query on PostgreSQL while the instance is busy (a fifth of a page): the
 * database server's CPU goes to the gate's ticket uses between them (docs/offline.md).
 */
const BUSY_STEP = 1000

const gzipAsync = promisify(gzip)

/** Page buffers kept for reuse between pages: four scanners' pages in flight at once, and a few more. */
const PAGE_BUFFERS = 8

/** A page's bytes, in a buffer to give back (`release`) once the answer was handed to the socket. */
export interface HeldPage {
  body: Buffer
  release(): void
}

interface Snapshot {
  /** The feed position the snapshot was taken at: a scanner's deltas continue from it. */
  position: number
  /** When a scanner last asked for it (the service's clock): an idle snapshot is let go. */
  askedAt: number
  /** The pages, as JSON and brotli, one after the other, and the file open for reading them. */
  file: string
  /** The pages compressed with gzip, each appended the first time a scanner asks for it. */
  gzipFile: string
  gzipEnd: number
  /** Both files, open while the snapshot is held (a request reads its page with one call). */
  open: Promise<{ pages: FileHandle; gzip: FileHandle }> | undefined
  gzipped: Map<number, Promise<[number, number]>>
  /**
   * Where each page lies, by the transfer id it starts after. A page is listed as soon as the page
   * before it is written, so a scanner takes page n while page n + 1 is being built.
   */
  pages: Map<number, Promise<PageExtent>>
  /** Ends the build if it still runs. */
  stop(): void
}

export interface SnapshotsDeps {
  db: Db
  clock: Clock
  /** The database a build's child process opens; an in-memory SQLite database is read in this process. */
  databaseUrl: string
  schema: string
  /** Where the instance keeps its snapshots' files (a folder of its own is made inside). */
  dataDir: string
  keyIds(): string[]
  pageSize: number
  /**
   * Resolves once the instance answers no request, or has waited long enough, with whether it is busy
   * (it answered requests lately): a build reads on then, in shorter steps while busy (none: at once,
   * whole pages).
   */
  quiet?: () => Promise<boolean>
  /** How long a build's child may take to write a page (BUILD_PAGE_TIMEOUT_MS unless given: tests shorten it). */
  pageTimeoutMs?: number
  /** How often the sweep runs (SWEEP_MS unless given: tests shorten it). */
  sweepMs?: number
}

/**
 * The first-sync snapshots of the instance's events, built off the request path and kept in files.
 * A build runs in a child process of its own (`snapshot-process.ts`), at a lower priority, with its own
 * database connection: it reads the event page by page in id order, encodes each page once and
 * compresses it with brotli once, writes both to the snapshot's file and reports where they lie.
 * Nothing of it stays in this process but that index (the memory a build takes goes with its process,
 * where a worker thread's would stay with the service), and requests read their page's bytes from the
 * file.
 */
export class Snapshots {
  /** The latest snapshot of each event (scanners starting together share one build). */
  private readonly held = new Map<number, Snapshot>()
  private readonly buffers = new PageBuffers(PAGE_BUFFERS)
  private folder: Promise<string> | undefined
  /** Builds running now (at most MAX_BUILDS). */
  private building = 0
  private readonly sweep: NodeJS.Timeout
  /** The latest look for other instances' leftover folders (`close` waits for it). */
  private tending: Promise<void>

  constructor(private readonly deps: SnapshotsDeps) {
    this.tending = this.tend()
    this.sweep = setInterval(() => {
      void this.forgetIdle()
      this.tending = this.tend()
    }, deps.sweepMs ?? SWEEP_MS)
    this.sweep.unref()
  }

  /**
   * Marks the instance's folder as in use, then deletes the sibling folders nobody marked in
   * LEFTOVER_AFTER_MS: those of instances that ended without deleting theirs (see leftovers.ts).
   */
  private async tend(): Promise<void> {
    const own = await this.folder?.catch(() => undefined)
    if (own) await markInUse(own).catch(() => {})
    await deleteLeftovers(path.join(this.deps.dataDir, 'scan-sync'), {
      matches: () => true,
      olderThanMs: LEFTOVER_AFTER_MS,
      ...(own ? { own: path.basename(own) } : {}),
    })
  }

  /**
   * The bytes of the page after transfer id `after` of the event's snapshot, in `encoding` (JSON when
   * undefined): for a first sync (no position) of the latest snapshot unless the feed moved too far
   * past it (then of a new one, built once however many scanners ask at the same moment); for a
   * continuation of the one taken at `position`. Undefined when that snapshot is no longer held (or was
   * let go while the page was read), or when MAX_BUILDS builds run already: the caller reads the page
   * from the database instead. `turn` is awaited once the page is built, before it is read.
   */
  async page(
    eventId: number,
    position: number | undefined,
    after: number,
    encoding: SnapshotEncoding | undefined,
    turn: () => Promise<void> = async () => {},
  ): Promise<HeldPage | undefined> {
    const asked = await this.forgetIdle()
    const snapshot = await this.choose(eventId, position)
    if (!snapshot) return undefined
    snapshot.askedAt = asked
    const listed = snapshot.pages.get(after)
    if (!listed) return undefined
    try {
      const extent = await listed
      const files = await snapshot.open!
      const [file, where] =
        encoding === 'gzip'
          ? [files.gzip, await this.gzipped(snapshot, extent)]
          : [files.pages, encoding === 'br' ? extent.br : extent.identity]
      // Built: it is read and sent when its turn comes (the instance's other requests first).
      await turn()
      const buffer = this.buffers.take(where[1])
      let given = false
      const release = () => {
        if (!given) this.buffers.give(buffer)
        given = true
      }
      try {
        return { body: await readExtent(file, where, buffer), release }
      } catch (err) {
        release()
        throw err
      }
    } catch (err) {
      if (this.held.get(eventId) === snapshot) throw err
      return undefined
    }
  }

  /** Lets go of the snapshots no scanner asked for in `SNAPSHOT_IDLE_MS`; resolves with now once their files are deleted. */
  private async forgetIdle(): Promise<number> {
    const now = this.deps.clock.now()
    const gone: Promise<void>[] = []
    for (const [eventId, held] of this.held)
      if (now - held.askedAt >= SNAPSHOT_IDLE_MS) gone.push(this.forget(eventId, held))
    await Promise.all(gone)
    return now
  }

  /** Ends the builds and deletes every snapshot's file (the app closes). */
  async close(): Promise<void> {
    clearInterval(this.sweep)
    await this.tending
    await Promise.all([...this.held].map(([eventId, held]) => this.forget(eventId, held)))
    const folder = await this.folder?.catch(() => undefined)
    this.folder = undefined
    if (folder) await fs.rm(folder, { recursive: true, force: true })
  }

  /**
   * Ends its build, closes and deletes its files: a request reading it meanwhile finds it gone and
   * reads the database instead.
   */
  private async forget(eventId: number, snapshot: Snapshot): Promise<void> {
    if (this.held.get(eventId) === snapshot) this.held.delete(eventId)
    snapshot.stop()
    const files = await snapshot.open?.catch(() => undefined)
    await Promise.all([
      files?.pages.close(),
      files?.gzip.close(),
      ...[snapshot.file, snapshot.gzipFile].map((file) => (file ? fs.rm(file, { force: true }) : undefined)),
    ]).catch(() => {})
  }

  private async choose(eventId: number, position: number | undefined) {
    if (position !== undefined) {
      const held = this.held.get(eventId)
      return held?.position === position ? held : undefined
    }
    const now = await feedPosition(this.deps.db, eventId)
    if (now === undefined) throw new NotFoundError('Event not found')
    // Read after the await: a build another request started meanwhile is shared.
    const latest = this.held.get(eventId)
    if (latest && now - latest.position <= SNAPSHOT_REUSE_CHANGES) return latest
    if (this.building >= MAX_BUILDS) return undefined
    if (latest) void this.forget(eventId, latest)
    const snapshot = this.build(eventId, now)
    this.held.set(eventId, snapshot)
    return snapshot
  }

  /** The instance's folder of snapshot files, made when first needed. */
  private dir(): Promise<string> {
    this.folder ??= (async () => {
      const parent = path.join(this.deps.dataDir, 'scan-sync')
      await fs.mkdir(parent, { recursive: true, mode: 0o700 })
      return fs.mkdtemp(path.join(parent, `${process.pid}-`))
    })()
    return this.folder
  }

  /** Starts the build of a snapshot taken at `position`; a build that fails is forgotten. */
  private build(eventId: number, position: number): Snapshot {
    let stopped = false
    const snapshot: Snapshot = {
      position,
      askedAt: this.deps.clock.now(),
      file: '',
      gzipFile: '',
      gzipEnd: 0,
      open: undefined,
      gzipped: new Map(),
      pages: new Map(),
      stop: () => {
        stopped = true
      },
    }
    const listed = (after: number) => {
      let resolve!: (page: PageExtent) => void
      let reject!: (err: unknown) => void
      const promise = new Promise<PageExtent>((res, rej) => {
        resolve = res
        reject = rej
      })
      promise.catch(() => {}) // a page nobody asked for may fail unobserved
      snapshot.pages.set(after, promise)
      return { resolve, reject }
    }
    let next = listed(0)
    const written = (page: PageExtent) => {
      const current = next
      if (page.next !== null) next = listed(page.next)
      current.resolve(page)
    }
    const failed = (err: unknown) => {
      next.reject(err)
      void this.forget(eventId, snapshot)
    }
    const start = async () => {
      const name = path.join(await this.dir(), `${eventId}-${position}-${randomBytes(4).toString('hex')}`)
      snapshot.file = `${name}.pages`
      snapshot.gzipFile = `${name}.gz`
      snapshot.open = (async () => {
        const pages = await fs.open(snapshot.file, 'wx+', 0o600)
        try {
          return { pages, gzip: await fs.open(snapshot.gzipFile, 'wx+', 0o600) }
        } catch (err) {
          await pages.close()
          throw err
        }
      })()
      await snapshot.open
      if (stopped) throw new Error('let go before it was built')
      const job: SnapshotJob = {
        eventId,
        position,
        keyIds: this.deps.keyIds(),
        pageSize: this.deps.pageSize,
        busyStep: BUSY_STEP,
        file: snapshot.file,
      }
      const { databaseUrl, schema, db } = this.deps
      const quiet = this.deps.quiet ?? (async () => false)
      // An in-memory SQLite database has no file another connection could open.
      if (databaseUrl === 'sqlite::memory:')
        return writeSnapshot({ db, dialect: 'sqlite' }, job, written, quiet)
      const child = fork(fileURLToPath(new URL('./snapshot-process.js', import.meta.url)), [], {
        stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      })
      snapshot.stop = () => void child.kill()
      const timeoutMs = this.deps.pageTimeoutMs ?? BUILD_PAGE_TIMEOUT_MS
      return new Promise<void>((resolve, reject) => {
        let stuck: NodeJS.Timeout | undefined
        const waitForPage = () => {
          clearTimeout(stuck)
          stuck = setTimeout(() => {
            reject(new Error(`the snapshot's build wrote no page in ${timeoutMs} ms`))
            child.kill()
          }, timeoutMs)
        }
        waitForPage()
        child.on('message', (message: BuildMessage) => {
          if ('quiet' in message) {
            // The answer to an ask the build no longer waits for (it asks one read ahead, and may have
            // ended and closed its channel meanwhile: `connected` can still say true) is dropped. Without
            // the callback, the refused send is an 'error' of the child, which failed a finished build.
            void quiet().then((busy) => {
              if (child.connected) child.send({ go: true, busy } satisfies BuildGo, () => {})
            })
            return
          }
          waitForPage()
          written(message)
        })
        child.on('error', reject)
        child.on('exit', (code, signal) => {
          clearTimeout(stuck)
          if (code === 0) resolve()
          else reject(new Error(`the snapshot's build ended with ${signal ?? code}`))
        })
        const sent: SnapshotProcessJob = { ...job, databaseUrl, schema }
        child.send(sent)
      })
    }
    this.building++
    start()
      .catch(failed)
      .finally(() => this.building--)
    return snapshot
  }

  /** Where the page lies compressed with gzip: compressed (off the event loop) and appended once. */
  private gzipped(snapshot: Snapshot, extent: PageExtent): Promise<[number, number]> {
    let done = snapshot.gzipped.get(extent.after)
    if (!done) {
      done = (async (): Promise<[number, number]> => {
        const files = await snapshot.open!
        const body = await gzipAsync(await readExtent(files.pages, extent.identity), { level: 6 })
        const at = snapshot.gzipEnd
        snapshot.gzipEnd += body.length
        await writeAll(files.gzip, body, at)
        return [at, body.length]
      })()
      done.catch(() => snapshot.gzipped.delete(extent.after))
      snapshot.gzipped.set(extent.after, done)
    }
    return done
  }
}
