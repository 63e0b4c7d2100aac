import type { Metrics } from '../metrics/metrics.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { API_KEY_PREFIX, type ApiKeyRecord, findLiveApiKey } from './api-keys.store.js'

/**
 * How long an answer from memory may stand for the database: the 60-second caller-cache window of the
 * specification, so a change made behind the service's back (a restore, a hand edit) is seen within it.
 */
export const KEY_CACHE_WINDOW_MS = 60_000

/**
 * How long an API key's revocation stays on the revocation list: longer than a cache entry lives, so
 * every instance's cache has dropped the key by the time the entry goes.
 */
export const API_KEY_REVOCATION_MS = 2 * KEY_CACHE_WINDOW_MS

/** Keys remembered per instance (live ones, and strings known to be no live key); a flood pushes out the oldest. */
const CACHED_KEYS = 10_000

/** How often last_used_at is refreshed; a write per request would make every call a write. */
const TOUCH_EVERY_MS = 60_000

/** The revocation-list entry of an API key (also its claims' `jti`). */
export function apiKeyJti(id: number): string {
  return `api_key:${id}`
}

/** A live key as this instance last found it. */
export interface CachedKey {
  readonly key: ApiKeyRecord
  /** The key's revocation-list entry */
  readonly jti: string
  /** The key's id as a string: the budget of a verify credential is counted under it. */
  readonly id: string
  /** What the owner of the cache keeps with the key (the claims of its answer, ...); reset on every read. */
  memo: unknown
  fetchedAt: number
  /** When the key was last found not revoked (read from the database, or checked on the revocation list). */
  checkedAt: number
  /** When this instance last wrote last_used_at. */
  touchedAt: number
}

type Found = CachedKey | null

export interface ApiKeyCache {
  /**
   * What this instance knows of a presented key without asking the database: the key, null when it is
   * no live key (revoked, or never issued), or undefined when only the database can tell (not seen in
   * the last minute). Costs a map read and a revocation-list check: the verify lane calls it per request.
   */
  known(plaintext: string): Found | undefined | Promise<Found>
  /**
   * The key from the database (one look-up per key at a time, shared by concurrent callers). While the
   * database is unreachable, a key in use is answered from memory (see `stillVouchedFor`); one this
   * instance cannot vouch for rejects, and its caller is answered 503.
   */
  fetch(plaintext: string): Promise<Found>
  /** `known`, else `fetch`. */
  find(plaintext: string): Found | Promise<Found>
  /** Whether last_used_at should be written now (at most once a minute per key and instance); marks it. */
  touchDue(entry: CachedKey, now: number): boolean
  /** Drops a key whose row changed (a partner assigned to it), so its next use reads the row again. */
  forget(plaintext: string): void
}

/**
 * Whether a cached key may still be answered from memory while the database cannot be read: it was
 * found not revoked less than API_KEY_REVOCATION_MS ago. A revocation made since then is still on the
 * revocation list (which holds it that long), so checking the list now catches it; one made before was
 * on the list at that check. A key nobody used for that long waits for the database.
 */
function stillVouchedFor(entry: CachedKey, now: number): boolean {
  return now - entry.checkedAt < API_KEY_REVOCATION_MS
}

/**
 * The one place this instance looks API keys up: the partner API, verify's API-key answers and verify
 * credentials all ask it, so a key is read from the database at most once a minute per instance and one
 * revocation reaches every use. A revocation through the service, the command line or RFC 7009 puts the
 * key's `jti` on the revocation list, which every instance learns through the revocation feed and which
 * is checked on each hit. Keys are held by their plaintext, not a digest: hashing on every verify cost
 * the lane a measurable share of its speed, and the process holds the signing secret, worth more than any
 * key, anyway. Hits, database reads and answers from memory during an outage are counted in
 * `wristband_api_key_lookups_total{result}`.
 */
export function createApiKeyCache(deps: {
  db: Db
  clock: Clock
  revocations: { isRevoked(jti: string): boolean | Promise<boolean> }
  metrics: Pick<Metrics, 'counter' | 'onCollect'>
}): ApiKeyCache {
  const { db, clock, revocations } = deps
  const live = new Map<string, CachedKey>()
  // Strings found to be no live key. A key never comes back from revoked, and a made-up one never
  // becomes real (keys are 256 random bits), so the answer holds for good: it lets a revoked key be
  // refused from memory while the database is unreachable, and a flood of made-up keys cost one read each.
  const absent = new Set<string>()
  const pending = new Map<string, Promise<Found>>()
  // Plain numbers on the hot path, added to the counter when it is read (as tokens verified are).
  const counts = { hit: 0, database: 0, outage: 0 }
  const counter = deps.metrics.counter({
    name: 'wristband_api_key_lookups_total',
    help: 'API keys presented, by where the answer came from: hit (memory), database, outage (memory while the database was unreachable)',
    labelNames: ['result'] as const,
  })
  deps.metrics.onCollect(() => {
    for (const result of ['hit', 'database', 'outage'] as const) {
      if (counts[result] === 0) continue
      counter.inc({ result }, counts[result])
      counts[result] = 0
    }
  })
  const bounded = <T>(m: { size: number; delete(k: T): boolean; keys(): IterableIterator<T> }) => {
    if (m.size >= CACHED_KEYS) m.delete(m.keys().next().value as T)
  }
  const checked = (plaintext: string, entry: CachedKey, revoked: boolean, now: number): Found => {
    if (revoked) {
      live.delete(plaintext)
      bounded(absent)
      absent.add(plaintext)
      return null
    }
    entry.checkedAt = now
    return entry
  }
  async function lookUp(plaintext: string, now: number): Promise<Found> {
    let key: ApiKeyRecord | null
    try {
      key = await findLiveApiKey(db, plaintext)
    } catch (err) {
      const stale = live.get(plaintext)
      if (stale === undefined || !stillVouchedFor(stale, now)) throw err
      counts.outage++
      return checked(plaintext, stale, await revocations.isRevoked(stale.jti), now)
    }
    counts.database++
    const before = live.get(plaintext)
    live.delete(plaintext)
    if (!key) {
      bounded(absent)
      absent.add(plaintext)
      return null
    }
    const jti = apiKeyJti(key.id)
    const entry: CachedKey = {
      key,
      jti,
      id: String(key.id),
      memo: undefined,
      fetchedAt: now,
      checkedAt: now,
      touchedAt: before?.touchedAt ?? key.last_used_at ?? 0,
    }
    if (await revocations.isRevoked(jti)) return checked(plaintext, entry, true, now)
    bounded(live)
    live.set(plaintext, entry)
    return entry
  }
  const cache: ApiKeyCache = {
    known(plaintext) {
      if (!plaintext.startsWith(API_KEY_PREFIX) || absent.has(plaintext)) return null
      const entry = live.get(plaintext)
      const now = clock.now()
      // An old entry stays until the database answers: fetch falls back on it while it cannot.
      if (entry === undefined || now - entry.fetchedAt >= KEY_CACHE_WINDOW_MS) return undefined
      counts.hit++
      const revoked = revocations.isRevoked(entry.jti)
      if (typeof revoked === 'boolean') return checked(plaintext, entry, revoked, now)
      return revoked.then((r) => checked(plaintext, entry, r, now))
    },
    fetch(plaintext) {
      let p = pending.get(plaintext)
      if (p === undefined) {
        p = lookUp(plaintext, clock.now()).finally(() => pending.delete(plaintext))
        pending.set(plaintext, p)
      }
      return p
    },
    find(plaintext) {
      const known = cache.known(plaintext)
      return known === undefined ? cache.fetch(plaintext) : known
    },
    touchDue(entry, now) {
      if (now - entry.touchedAt < TOUCH_EVERY_MS) return false
      entry.touchedAt = now
      return true
    },
    forget(plaintext) {
      live.delete(plaintext)
    },
  }
  return cache
}
