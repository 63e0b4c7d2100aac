import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { sha256Hex } from '../platform/digest.js'
import type { Claims } from '../tokens/claims.js'
import type { CredentialLookup } from '../tokens/verify-callers.js'
import { API_KEY_PREFIX, type ApiKeyRecord, findLiveApiKey } from './api-keys.store.js'

/** How long a caller may treat an API-key answer as valid: the 60-second cache window of the spec. */
const CLAIMS_WINDOW_SECONDS = 60

export function apiKeyClaims(key: ApiKeyRecord, now: number): Claims {
  const iat = Math.floor(now / 1000)
  return {
    type: 'api_key',
    sub: String(key.id),
    role: 'event_client',
    jti: `api_key:${key.id}`,
    iat,
    // An API key does not expire, but its answer is only good until the caller's cache lapses, so a
    // revocation reaches every caller within one window.
    exp: iat + CLAIMS_WINDOW_SECONDS,
    event_ids: [key.event_id],
    permissions: { [String(key.event_id)]: key.scopes },
  }
}

/** The revocation-list entry of an API key: its claims' `jti`. */
export function apiKeyJti(id: number): string {
  return `api_key:${id}`
}

/**
 * How long an API key's revocation stays on the revocation list: longer than a cache entry lives, so
 * every instance's cache has dropped the key by the time the entry goes.
 */
export const API_KEY_REVOCATION_MS = 2 * CLAIMS_WINDOW_SECONDS * 1000

/** Keys remembered per instance; a flood of keys pushes out the oldest. */
const CACHED_KEYS = 10_000

interface Cached {
  key: ApiKeyRecord
  fetchedAt: number
  /** When the key was last found not revoked (read from the database, or checked on the revocation list). */
  checkedAt: number
  claims: Claims
}

/**
 * Whether a cached key may still be answered from memory while the database cannot be read: it was
 * found not revoked less than API_KEY_REVOCATION_MS ago. A revocation made since then is still on
 * the revocation list (which holds it that long), so checking the list now catches it; one made
 * before was on the list at that check. A key nobody used for that long waits for the database.
 */
function stillVouchedFor(entry: { checkedAt: number }, now: number): boolean {
  return now - entry.checkedAt < API_KEY_REVOCATION_MS
}

/**
 * Resolves `wb_…` keys for POST /tokens/verify from a cache of this instance (bounded, keyed by the
 * key's SHA-256), so a verify of a known key costs no database look-up. An entry lives at most 60 s
 * (the caller-cache window the specification allows, so a change made behind the service's back is
 * seen within it); a revocation through the service or the command line puts the key's `jti` on the
 * revocation list, which every instance checks on each hit and learns through the revocation feed.
 * Keys found to be no live key are remembered as such (a new key is a new string, and works at once).
 */
export function createApiKeyResolver(
  db: Db,
  clock: Clock,
  revocations: { isRevoked(jti: string): boolean | Promise<boolean> },
) {
  const cache = new Map<string, Cached>()
  // Keys found to be no live key (revoked, or never issued), by digest. A key never comes back from
  // revoked, and a made-up one never becomes real (keys are 256 random bits), so the answer holds for
  // good: it lets the answer for a revoked key come from memory while the database is unreachable.
  const absent = new Set<string>()
  const rememberAbsent = (hash: string) => {
    if (absent.size >= CACHED_KEYS) absent.delete(absent.values().next().value!)
    absent.add(hash)
  }
  // The claims of an answer carry iat/exp of the second they were made; one object per second and key.
  const claimsNow = (entry: Cached, now: number): Claims => {
    if (entry.claims.iat !== Math.floor(now / 1000)) entry.claims = apiKeyClaims(entry.key, now)
    return entry.claims
  }
  async function fetch(hash: string, plaintext: string, now: number): Promise<Claims | null> {
    let key: ApiKeyRecord | null
    try {
      key = await findLiveApiKey(db, plaintext)
    } catch (err) {
      // The database unreachable: a key in use goes on being answered from memory (see stillVouchedFor).
      const stale = cache.get(hash)
      if (stale === undefined || !stillVouchedFor(stale, now)) throw err
      if (await revocations.isRevoked(apiKeyJti(stale.key.id))) {
        cache.delete(hash)
        return null
      }
      stale.checkedAt = now
      return claimsNow(stale, now)
    }
    cache.delete(hash)
    if (!key) {
      rememberAbsent(hash)
      return null
    }
    const revoked = await revocations.isRevoked(apiKeyJti(key.id))
    if (revoked) return null
    if (cache.size >= CACHED_KEYS) cache.delete(cache.keys().next().value!)
    const entry = { key, fetchedAt: now, checkedAt: now, claims: apiKeyClaims(key, now) }
    cache.set(hash, entry)
    return entry.claims
  }
  return {
    prefix: API_KEY_PREFIX,
    resolve(plaintext: string): Claims | null | Promise<Claims | null> {
      const hash = sha256Hex(plaintext)
      if (absent.has(hash)) return null
      const now = clock.now()
      const entry = cache.get(hash)
      // An old entry stays until the database answers: fetch falls back on it while it cannot.
      if (entry === undefined || now - entry.fetchedAt >= CLAIMS_WINDOW_SECONDS * 1000)
        return fetch(hash, plaintext, now)
      const revoked = revocations.isRevoked(apiKeyJti(entry.key.id))
      if (revoked === false) {
        entry.checkedAt = now
        return claimsNow(entry, now)
      }
      if (revoked === true) {
        cache.delete(hash)
        return null
      }
      return revoked.then((r) => {
        if (r) return null
        entry.checkedAt = now
        return claimsNow(entry, now)
      })
    },
  }
}

/** The scope of a verify credential: an API key a backend sends with its POST /tokens/verify calls. */
export const VERIFY_SCOPE = 'tokens:verify'

interface VerifyCredential {
  id: string
  jti: string
  fetchedAt: number
  /** When the key was last found not revoked (see stillVouchedFor). */
  checkedAt: number
}

/**
 * Tells POST /tokens/verify (its route and its lane) which verify credential a presented `api_key`
 * is: the key's id when it is a live API key with scope `tokens:verify`, else null. Answered from a
 * cache of this instance (`known`) on every request but the first of a key in a minute (a backend sends
 * its key with each call, so the look-up must cost what a map read costs); the first asks the database
 * (`fetch`). A revocation reaches the cache through the revocation list, checked on every hit, as for
 * the key's own verification. Keys are remembered by their plaintext, not by a digest: hashing on every
 * call cost the lane a measurable share of its speed, and the process holds the signing secret, worth
 * more than any key, anyway. Keys that are no verify credential are not remembered (their requests
 * count against the address).
 */
export function createVerifyCredentials(
  db: Db,
  clock: Clock,
  revocations: { isRevoked(jti: string): boolean | Promise<boolean> },
): CredentialLookup {
  const cache = new Map<string, VerifyCredential>()
  // One look-up per key at a time: a busy backend's first calls after a start share it.
  const pending = new Map<string, Promise<string | null>>()
  async function lookUp(plaintext: string, now: number): Promise<string | null> {
    let key: ApiKeyRecord | null
    try {
      key = await findLiveApiKey(db, plaintext)
    } catch (err) {
      // The database unreachable: a credential in use keeps working from memory (see stillVouchedFor);
      // one this instance cannot vouch for cannot be checked, and its caller is answered 503.
      const stale = cache.get(plaintext)
      if (stale === undefined || !stillVouchedFor(stale, now)) throw err
      if (await revocations.isRevoked(stale.jti)) {
        cache.delete(plaintext)
        return null
      }
      stale.checkedAt = now
      return stale.id
    }
    cache.delete(plaintext)
    if (!key?.scopes.includes(VERIFY_SCOPE)) return null
    const jti = apiKeyJti(key.id)
    if (await revocations.isRevoked(jti)) return null
    if (cache.size >= CACHED_KEYS) cache.delete(cache.keys().next().value!)
    const entry = { id: String(key.id), jti, fetchedAt: now, checkedAt: now }
    cache.set(plaintext, entry)
    return entry.id
  }
  return {
    known(plaintext) {
      if (!plaintext.startsWith(API_KEY_PREFIX)) return null
      const entry = cache.get(plaintext)
      const now = clock.now()
      // An old entry stays until the database answers: fetch falls back on it while it cannot.
      if (entry === undefined || now - entry.fetchedAt >= CLAIMS_WINDOW_SECONDS * 1000) return undefined
      const revoked = revocations.isRevoked(entry.jti)
      if (revoked === false) {
        entry.checkedAt = now
        return entry.id
      }
      if (revoked === true) {
        cache.delete(plaintext)
        return null
      }
      return revoked.then((r) => {
        if (r) return null
        entry.checkedAt = now
        return entry.id
      })
    },
    fetch(plaintext) {
      let p = pending.get(plaintext)
      if (p === undefined) {
        p = lookUp(plaintext, clock.now()).finally(() => pending.delete(plaintext))
        pending.set(plaintext, p)
      }
      return p
    },
  }
}
