import { fork } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { deleteLeftovers } from '../platform/leftovers.js'
import { ACCOUNT_PREFIX, accountTokensJti } from './claims.js'
import { RevocationSet, RevocationSetBuilder, type Sorted } from './revocation-set.js'
import {
  insertRevocations,
  isRevokedInDb,
  liveRevocationsPage,
  newestRevokedAt,
  readLiveRevocations,
  revocationsSince,
} from './revocations.store.js'

export interface Revocation {
  jti: string
  /** When the revoked credential expires on its own (ms); the entry is dropped after that. */
  expiresAt: number
}

/**
 * The revocation list: API keys, access and offline tokens, devices' offline-token generations. A
 * rotated or ended refresh token is not on it: its row refuses it (token.service.ts), so the list
 * grows with what is actually revoked, not with every refresh. The database is the record (revocations survive restarts of the service and of
 * Redis, and every process on the database writes there: the service, the command line). Each
 * instance keeps every live revocation in its own memory, so a look-up is a synchronous map read:
 * it learns revocations written by other processes by reading the database from a cursor every
 * REVOCATION_POLL_MS and, with Redis, at once from a pub/sub feed.
 */
export interface RevocationStore {
  isRevoked(jti: string): boolean | Promise<boolean>
  /**
   * Whether the token generation `generation` of the account (`role`, `sub`) has ended: its entry
   * (`accountTokensJti`) is on the list. From memory, without allocating, while the list answers from
   * memory (the verify lane asks it for every token).
   */
  isAccountEnded(role: string, sub: string, generation: number): boolean | Promise<boolean>
  revoke(entries: Revocation[]): Promise<void>
  /**
   * Whether this instance's memory is known to hold every revocation written so far, so that it can
   * verify without the database (GET /ready/verify; docs/operations.md, "During a database outage").
   */
  freshness(): RevocationFreshness
  /** Loads the live revocations and starts following the feed; a command-line process never starts it. */
  start(): Promise<void>
  stop(): void
}

export interface RevocationFreshness {
  fresh: boolean
  /**
   * What vouches for it: `feed`, the Redis feed followed without a break since the last read of the
   * database (every revocation is published as it is written, and none can be written while the
   * database is down); `database`, a read of the database's revocations less than STALE_AFTER_MS ago.
   */
  via: 'feed' | 'database' | 'none'
  /** Milliseconds since the last successful read of the database's revocations. */
  lastReadAgoMs: number
}

/**
 * How old the last read of the database's revocations may be, without the Redis feed, for the memory
 * to count as complete: a few polls, so one slow query does not count, while a database outage does
 * within seconds (a revocation another process wrote just before it may have been missed).
 */
export function staleAfterMs(pollMs: number): number {
  return Math.max(5_000, 3 * pollMs)
}

export interface RevocationDeps {
  db: Db
  clock: Clock
  /** How often the database is read for revocations written by other processes (REVOCATION_POLL_MS). */
  pollMs?: number
  log?: FastifyBaseLogger
  /**
   * Awaited before each page of the load at start: a turn of the event loop when absent, so requests
   * are served while it runs (SQLite answers synchronously); tests hold the load with it.
   */
  loadPace?: () => Promise<void>
  /**
   * The database as a URL and schema, for the load at start to be read by a child process with its own
   * connection (revocation-load.process.ts), which writes the arrays to a file in `dir` (DATA_DIR): what
   * the reading makes and drops leaves with the child, where this process's heap, or a worker thread's,
   * kept it grown (bench:scale, "RSS per million live revocations"). Absent: read in this process (an
   * in-memory SQLite database, tests holding the load).
   */
  database?: ChildLoadDatabase
}

/** The database a load's child process opens, and where it writes its file. */
interface ChildLoadDatabase {
  url: string
  schema: string
  dir: string
  /** How long the child may take to answer (CHILD_LOAD_TIMEOUT_MS unless given: tests shorten it). */
  timeoutMs?: number
}

/**
 * A load's child process that has not answered in this long is ended and this process reads the list
 * itself: a child stuck on a connection that never answers would otherwise leave the list unloaded (every
 * verify asking the database) for as long as the instance runs. A million revocations take seconds.
 */
const CHILD_LOAD_TIMEOUT_MS = 5 * 60_000

/**
 * A load's file lives from the child's write to this process's read, seconds: one older than this was
 * left by a service killed in between (see leftovers.ts), and is deleted when an instance starts.
 */
const LEFTOVER_LOAD_MS = 2 * CHILD_LOAD_TIMEOUT_MS

/** A load's file in DATA_DIR: `revocations-<pid>-<12 random hex>.load`. */
const LOAD_FILE = /^revocations-.*\.load$/

/** What the load's child process is sent. */
export interface RevocationLoadRequest {
  url: string
  schema: string
  now: number
  pageSize: number
  /** The jtis whose text this process needs (account ends), sent back beside the arrays. */
  prefix: string
  /** The first page, read by this process already (its lines): the child reads on after it. */
  first: string
  /** Where the child writes the sorted arrays (hi, lo, exp, one after the other), for this process to read. */
  file: string
}

/** The child's answer: the arrays are in the request's file. */
export interface RevocationLoadAnswer {
  /** Entries in the arrays. */
  entries: number
  /** Live revocations read (duplicates included). */
  count: number
  accounts: [string, number][]
}

/**
 * Forks the load's child process, which reads on after `first` (the first page's lines); `started` is
 * given the way to stop it (with the store).
 */
async function loadInChild(
  database: ChildLoadDatabase,
  now: number,
  first: string,
  started: (stop: () => void) => void,
) {
  const file = path.join(database.dir, `revocations-${process.pid}-${randomBytes(6).toString('hex')}.load`)
  const request: RevocationLoadRequest = {
    url: database.url,
    schema: database.schema,
    now,
    pageSize: REVOCATION_PAGE,
    prefix: ACCOUNT_PREFIX,
    first,
    file,
  }
  const child = fork(fileURLToPath(new URL('./revocation-load.process.js', import.meta.url)), [], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  })
  started(() => void child.kill())
  try {
    const timeoutMs = database.timeoutMs ?? CHILD_LOAD_TIMEOUT_MS
    let timer: NodeJS.Timeout | undefined
    const answer = await new Promise<RevocationLoadAnswer>((resolve, reject) => {
      timer = setTimeout(() => {
        reject(new Error(`the revocation load's child process did not answer in ${timeoutMs} ms`))
        child.kill()
      }, timeoutMs)
      child.once('message', (m: RevocationLoadAnswer | { error: string }) =>
        'error' in m ? reject(new Error(m.error)) : resolve(m),
      )
      child.once('error', reject)
      child.once('exit', (code, signal) =>
        reject(new Error(`the revocation load's child process ended with ${signal ?? code}`)),
      )
      child.send(request)
    }).finally(() => clearTimeout(timer))
    return { ...answer, sorted: await readSorted(file, answer.entries) }
  } finally {
    await fs.rm(file, { force: true })
  }
}

/**
 * The arrays the child wrote, read straight into arrays of their size: no buffer in between, which
 * the C library would keep (a pipe's or a message's megabytes stay in the process after they are freed).
 */
async function readSorted(file: string, entries: number): Promise<Sorted> {
  const sorted = { hi: new Int32Array(entries), lo: new Int32Array(entries), exp: new Uint32Array(entries) }
  const fh = await fs.open(file, 'r')
  try {
    let position = 0
    for (const a of [sorted.hi, sorted.lo, sorted.exp]) {
      const bytes = new Uint8Array(a.buffer)
      for (let at = 0; at < bytes.byteLength; ) {
        const { bytesRead } = await fh.read(bytes, at, bytes.byteLength - at, position + at)
        if (bytesRead === 0) throw new Error('the revocation load file ended early')
        at += bytesRead
      }
      position += bytes.byteLength
    }
    return sorted
  } finally {
    await fh.close()
  }
}

/**
 * How far back each read of the cursor looks past the newest `revoked_at` it has seen: a revocation
 * whose transaction committed after a later one (its `revoked_at` was taken first), or written by a
 * process whose clock runs a little behind, is still read. Re-reading a known revocation is harmless.
 */
const CURSOR_OVERLAP_MS = 5_000

/** Live revocations are read in pages of this many (start-up, Redis rebuild): no query holds them all. */
export const REVOCATION_PAGE = 10_000

/** Every live revocation at `now`, page by page, in (expires_at, jti) order; `between` runs before each page. */
async function eachLivePage(
  db: Db,
  now: number,
  page: (rows: Revocation[]) => void | Promise<void>,
  between: () => Promise<void> = async () => {},
) {
  let after = { expiresAt: now, jti: '' }
  for (;;) {
    await between()
    const rows = await liveRevocationsPage(db, after, REVOCATION_PAGE)
    if (rows.length === 0) return
    const entries = rows.map((r) => ({ jti: r.jti, expiresAt: Number(r.expires_at) }))
    await page(entries)
    if (rows.length < REVOCATION_PAGE) return
    after = entries.at(-1)!
  }
}

/** Lets the event loop run between two pages of the load: requests are served while it runs. */
const yieldToEvents = () => new Promise<void>((resolve) => setImmediate(resolve))

interface AccountEnd {
  role: string
  sub: string
  /** The newest ended generation. */
  generation: number
  expiresAt: number
}

/** `account:<role>:<sub>:<generation>`, or undefined for another entry. */
function parseAccountEntry(jti: string): Omit<AccountEnd, 'expiresAt'> | undefined {
  const parts = jti.slice(ACCOUNT_PREFIX.length).split(':')
  if (parts.length !== 3) return undefined
  const [role, sub, raw] = parts as [string, string, string]
  const generation = Number(raw)
  return Number.isInteger(generation) && role && sub ? { role, sub, generation } : undefined
}

/**
 * Reads the revocations written since the last read, by any process on the database. The cursor is
 * the newest `revoked_at` seen, capped at this instance's clock, so one row dated in the future cannot
 * push it past the rows of processes whose clocks are right.
 */
export function revocationCursor(db: Db, clock: Clock) {
  let cursor = Number.NEGATIVE_INFINITY
  const advance = (rows: { revoked_at: number }[]) => {
    for (const r of rows) if (r.revoked_at > cursor) cursor = r.revoked_at
    cursor = Math.min(cursor, clock.now())
  }
  return {
    /**
     * Starts the cursor at the newest `revoked_at` written so far: what is written from then on comes
     * from `next`, while `all` reads what is live.
     */
    async begin(): Promise<void> {
      const newest = await newestRevokedAt(db)
      advance([{ revoked_at: newest ?? Number.NEGATIVE_INFINITY }])
    },
    /**
     * Every live revocation into `builder`, page by page (after `begin`), up to `maxPages`, from `first`
     * when given; `account` is given the account ends among them. `between` runs before each page
     * read. Undefined once all are read, else the last page's lines (see `readLiveRevocations`).
     */
    all(
      builder: RevocationSetBuilder,
      account: (jti: string, expiresAt: number) => void,
      between: () => Promise<void>,
      maxPages?: number,
      first?: string,
    ): Promise<string | undefined> {
      return readLiveRevocations(
        db,
        clock.now(),
        REVOCATION_PAGE,
        builder,
        ACCOUNT_PREFIX,
        account,
        between,
        maxPages,
        first,
      )
    },
    /** The revocations written since the previous read (and a few seconds before it). */
    async next(): Promise<Revocation[]> {
      const from = cursor - CURSOR_OVERLAP_MS
      const rows = await revocationsSince(db, Number.isFinite(from) ? from : 0)
      advance(rows.map((r) => ({ revoked_at: Number(r.revoked_at) })))
      return rows.map((r) => ({ jti: r.jti, expiresAt: Number(r.expires_at) }))
    },
  }
}

/**
 * The in-memory copy every instance keeps: every live revocation, loaded from the database in the
 * background once the cursor has started (the service listens meanwhile, and a look-up the memory
 * cannot answer yet is the database's), then followed through the cursor; expired entries are swept
 * each minute. Held compactly (revocation-set.ts: 12 bytes an entry in sorted typed arrays).
 */
function localBlocklist({
  db,
  clock,
  pollMs = 1000,
  log,
  loadPace = yieldToEvents,
  database,
}: RevocationDeps) {
  const revoked = new RevocationSet()
  // Account generations, also kept apart so that a look-up is one map read by subject with no key to
  // build: per subject id, the newest ended generation of each role that has one. A generation ends
  // only after every one before it did, so a token of that generation or an older one is refused.
  const accounts = new Map<string, AccountEnd[]>()
  const addAccount = (jti: string, expiresAt: number) => {
    const end = parseAccountEntry(jti)
    if (!end) return
    const ends = accounts.get(end.sub)
    const known = ends?.find((e) => e.role === end.role)
    if (!ends) accounts.set(end.sub, [{ ...end, expiresAt }])
    else if (!known) ends.push({ ...end, expiresAt })
    else {
      known.generation = Math.max(known.generation, end.generation)
      known.expiresAt = Math.max(known.expiresAt, expiresAt)
    }
  }
  const sweepAccounts = (now: number) => {
    for (const [sub, ends] of accounts) {
      const live = ends.filter((e) => e.expiresAt > now)
      if (live.length === 0) accounts.delete(sub)
      else if (live.length < ends.length) accounts.set(sub, live)
    }
  }
  const cursor = revocationCursor(db, clock)
  let stopChild = () => {}
  let poller: NodeJS.Timeout | undefined
  let sweeper: NodeJS.Timeout | undefined
  let stopped = false
  let failing = false
  let loaded = false
  let readAt = Number.NEGATIVE_INFINITY
  const add = (entries: Revocation[]) => {
    const now = clock.now()
    for (const e of entries) {
      revoked.add(e.jti, e.expiresAt, now)
      if (e.expiresAt > now && e.jti.startsWith(ACCOUNT_PREFIX)) addAccount(e.jti, e.expiresAt)
    }
  }
  const catchUp = async () => {
    const started = clock.now()
    add(await cursor.next())
    readAt = started
  }
  const poll = async () => {
    try {
      await catchUp()
      if (failing) log?.info('revocations readable again')
      failing = false
    } catch (err) {
      // Logged once per outage; the database-outage handling of the rest of the service applies.
      if (!failing && !stopped)
        log?.warn({ err: { message: (err as Error).message } }, 'could not read new revocations')
      failing = true
    }
    if (!stopped) poller = setTimeout(poll, pollMs).unref()
  }
  /** Reads every live revocation into the arrays; a failed read starts over a second later. */
  const load = async () => {
    let warned = false
    const between = async () => {
      if (stopped) throw new Error('stopped')
      await loadPace()
    }
    // Read here, a page a turn of the event loop. A list of more than one page is read on by a child
    // process with its own connection, when there is a database it can open (see `database`): it is
    // sent the first page's lines, so no page is read twice.
    /** How many were read once all are in the arrays, else the last page's lines (`pages` read). */
    const here = async (pages?: number, first?: string): Promise<number | string> => {
      const builder = new RevocationSetBuilder()
      const last = await cursor.all(builder, addAccount, between, pages, first)
      if (last !== undefined || stopped) return last ?? 0
      const count = builder.length
      revoked.install(builder, clock.now())
      return count
    }
    const byChild = async (db: ChildLoadDatabase, now: number, first: string) => {
      const { sorted, accounts, count } = await loadInChild(db, now, first, (stop) => {
        stopChild = stop
      })
      if (stopped) return 0
      for (const [jti, expiresAt] of accounts) addAccount(jti, expiresAt)
      revoked.installSorted(sorted, clock.now())
      return count
    }
    while (!stopped) {
      const started = clock.now()
      try {
        let by = 'this process'
        let count = await here(database ? 1 : undefined)
        if (typeof count === 'string' && database && !stopped) {
          const first = count
          try {
            count = await byChild(database, started, first)
            by = 'a child process'
          } catch (err) {
            // A DATA_DIR that cannot be written, a process limit: this process reads it after all.
            if (stopped) return
            log?.warn(
              { err: { message: (err as Error).message } },
              'could not load the revocations in a child process',
            )
            count = await here(undefined, first)
          }
        }
        if (stopped) return
        readAt = Math.max(readAt, started)
        loaded = true
        log?.info({ revocations: count, by, ms: clock.now() - started }, 'revocations loaded')
        return
      } catch (err) {
        if (stopped) return
        if (!warned)
          log?.warn({ err: { message: (err as Error).message } }, 'could not load the revocations: retrying')
        warned = true
        await new Promise((resolve) => setTimeout(resolve, 1000).unref())
      }
    }
  }
  const staleAfter = staleAfterMs(pollMs)
  return {
    has: (jti: string) => revoked.has(jti),
    accountEnded(role: string, sub: string, generation: number): boolean {
      const ends = accounts.get(sub)
      if (ends === undefined) return false
      for (let i = 0; i < ends.length; i++) {
        const e = ends[i]!
        if (e.role === role) return generation <= e.generation
      }
      return false
    },
    /** Whether every live revocation has been loaded: until then a miss in memory proves nothing. */
    loaded: () => loaded,
    add,
    catchUp,
    /** Milliseconds since the last read of the database's revocations began (that succeeded). */
    readAgoMs: () => clock.now() - readAt,
    /** Whether the memory is loaded and that read recent enough to vouch for it on its own. */
    readRecently: () => loaded && clock.now() - readAt < staleAfter,
    /**
     * Deletes the load files a killed instance left in DATA_DIR, starts the cursor (one query: a
     * database that cannot answer fails the start), then loads the live revocations without waiting for
     * them.
     */
    async start() {
      if (database) {
        const deleted = await deleteLeftovers(database.dir, {
          matches: (name) => LOAD_FILE.test(name),
          olderThanMs: LEFTOVER_LOAD_MS,
        })
        if (deleted.length > 0)
          log?.info({ files: deleted }, 'deleted revocation load files a stopped instance left in DATA_DIR')
      }
      await cursor.begin()
      void load()
      poller = setTimeout(poll, pollMs).unref()
      sweeper = setInterval(() => {
        revoked.sweep(clock.now())
        sweepAccounts(clock.now())
      }, 60_000).unref()
    },
    stop() {
      stopped = true
      stopChild()
      clearTimeout(poller)
      clearInterval(sweeper)
    },
  }
}

/** Single-instance store (no Redis): the database is the only channel between processes. */
export function memoryRevocations(deps: RevocationDeps): RevocationStore {
  const local = localBlocklist(deps)
  return {
    isRevoked(jti) {
      if (local.has(jti)) return true
      return local.loaded() ? false : isRevokedInDb(deps.db, jti)
    },
    isAccountEnded(role, sub, generation) {
      if (local.accountEnded(role, sub, generation)) return true
      return local.loaded() ? false : isRevokedInDb(deps.db, accountTokensJti(role, sub, generation))
    },
    async revoke(entries) {
      await insertRevocations(deps.db, deps.clock.now(), entries)
      local.add(entries)
    },
    freshness: () => {
      const fresh = local.readRecently()
      return { fresh, via: fresh ? 'database' : 'none', lastReadAgoMs: local.readAgoMs() }
    },
    start: () => local.start(),
    stop: () => local.stop(),
  }
}

// Answers -1 when the copy in Redis is not known to be complete (Redis restarted, reload running).
// KEYS: unused, the completeness marker, the jti's key.
const CHECK_LUA = `
local revoked = -1
if redis.call('EXISTS', KEYS[2]) == 1 then revoked = redis.call('EXISTS', KEYS[3]) end
return revoked
`

interface RedisWithRevocationScripts extends Redis {
  wristbandRevocationCheck(unused: string, marker: string, key: string): Promise<number>
}

/** A feed message: one `expiresAt jti` line per revocation. */
function encode(entries: Revocation[]): string {
  return entries.map((e) => `${e.expiresAt} ${e.jti}`).join('\n')
}

function decode(message: string): Revocation[] {
  const out: Revocation[] = []
  for (const line of message.split('\n')) {
    const space = line.indexOf(' ')
    const expiresAt = Number(line.slice(0, space))
    if (space > 0 && Number.isFinite(expiresAt)) out.push({ jti: line.slice(space + 1), expiresAt })
  }
  return out
}

/**
 * Shared store (several instances on one Redis). Look-ups are answered from this instance's memory
 * while its subscription to the revocation feed is live: every revocation is written to the database,
 * then published, so an instance hears of it within a round trip. When the subscription (re)starts,
 * the instance reads the database from its cursor before it trusts its memory again, so nothing
 * published while it was away is missed. While the subscription is down, each look-up asks Redis's
 * copy of the list (kept as one key per jti, reloaded from the database when Redis comes back empty)
 * or, when Redis is unreachable too, the database: it never answers from a copy that may be behind.
 */
export function redisRevocations(
  deps: RevocationDeps,
  redis: Redis,
  prefix: string,
  log: FastifyBaseLogger,
): RevocationStore {
  const { db, clock } = deps
  const local = localBlocklist({ ...deps, log })
  const marker = `${prefix}rv:complete`
  const rebuilding = `${prefix}rv:rebuilding`
  const channel = `${prefix}rv:feed`
  const key = (jti: string) => `${prefix}rv:${jti}`
  // Sent once as a script, then called by its hash (EVALSHA), not as the script's text every time.
  if (!('wristbandRevocationCheck' in redis))
    redis.defineCommand('wristbandRevocationCheck', { numberOfKeys: 3, lua: CHECK_LUA })
  const scripts = redis as RedisWithRevocationScripts
  let subscriber: Redis | undefined
  let live = false

  async function lookUp(jti: string): Promise<boolean> {
    try {
      const r = await scripts.wristbandRevocationCheck(marker, marker, key(jti))
      if (r !== -1) return r === 1
    } catch {
      // Redis unreachable: the database answers.
    }
    return isRevokedInDb(db, jti)
  }

  /**
   * Copies the database's live revocations into Redis when its completeness marker is missing (Redis
   * restarted empty, or never filled); a copy that is marked complete is left as it is, so neither a
   * start-up nor a reconnect rewrites it. One instance of a fleet copies (a lock key); the others, like
   * this one meanwhile, ask the database in a look-up while the marker is missing. Never awaited by
   * start-up: the service listens while the copy is made.
   */
  async function rebuildIfIncomplete() {
    try {
      if ((await redis.exists(marker)) === 1) return
      if ((await redis.set(rebuilding, '1', 'PX', 120_000, 'NX')) !== 'OK') return
      try {
        // Another instance may have finished its copy between the check above and the lock.
        if ((await redis.exists(marker)) === 1) return
        const now = clock.now()
        await eachLivePage(db, now, async (rows) => {
          const p = redis.pipeline()
          for (const r of rows) p.set(key(r.jti), '1', 'PX', Math.max(1, r.expiresAt - now))
          await p.exec()
        })
        await redis.set(marker, '1')
        log.info('revocations copied into redis')
      } finally {
        await redis.del(rebuilding)
      }
    } catch (err) {
      log.warn({ err: { message: (err as Error).message } }, 'could not reload revocations into redis')
    }
  }
  const onReady = () => void rebuildIfIncomplete()

  // Subscribed first, then caught up from the database: a revocation published before the
  // subscription took effect was written to the database before it was published, so the read sees it.
  // A subscription or read that fails (a command timed out on a busy Redis, the database down) is tried
  // again each second while the connection stands, not only at its next reconnect; warned once.
  let followFailing = false
  async function follow(sub: Redis) {
    try {
      await sub.subscribe(channel)
      await local.catchUp()
      live = sub.status === 'ready'
      followFailing = false
      if (live) log.info('revocation feed followed')
    } catch (err) {
      if (!followFailing)
        log.warn({ err: { message: (err as Error).message } }, 'could not follow the revocation feed')
      followFailing = true
      setTimeout(() => {
        if (!live && sub.status === 'ready') void follow(sub)
      }, 1000).unref()
    }
  }

  return {
    isRevoked(jti) {
      if (local.has(jti)) return true
      return live && local.loaded() ? false : lookUp(jti)
    },
    isAccountEnded(role, sub, generation) {
      if (local.accountEnded(role, sub, generation)) return true
      // Every generation that ends writes its own entry, so the one the token carries is asked for.
      return live && local.loaded() ? false : lookUp(accountTokensJti(role, sub, generation))
    },
    freshness() {
      const lastReadAgoMs = local.readAgoMs()
      if (live && local.loaded()) return { fresh: true, via: 'feed', lastReadAgoMs }
      const fresh = local.readRecently()
      return { fresh, via: fresh ? 'database' : 'none', lastReadAgoMs }
    },
    async revoke(entries) {
      if (entries.length === 0) return
      const now = clock.now()
      await insertRevocations(db, now, entries)
      local.add(entries)
      try {
        const p = redis.pipeline()
        for (const e of entries) p.set(key(e.jti), '1', 'PX', Math.max(1, e.expiresAt - now))
        p.publish(channel, encode(entries))
        await p.exec()
      } catch {
        // Durable in the database; other instances read it from there within REVOCATION_POLL_MS, and
        // it is copied into Redis when Redis is back (reload on 'ready').
      }
    },
    async start() {
      await local.start()
      redis.on('ready', onReady)
      if (redis.status === 'ready') void rebuildIfIncomplete()
      const sub = redis.duplicate({ lazyConnect: true, autoResubscribe: false })
      subscriber = sub
      sub.on('error', () => {
        // The main client logs the outage once; this connection retries on its own.
      })
      sub.on('message', (_channel: string, message: string) => local.add(decode(message)))
      sub.on('close', () => {
        // Info, not a warning: the Redis client warns once per outage already.
        if (live) log.info('revocation feed lost: each look-up asks redis or the database until it is back')
        live = false
      })
      sub.on('ready', () => void follow(sub))
      try {
        await sub.connect()
      } catch {
        // Unreachable: look-ups go to Redis or the database until it connects.
      }
    },
    stop() {
      live = false
      local.stop()
      redis.off('ready', onReady)
      subscriber?.disconnect()
    },
  }
}
