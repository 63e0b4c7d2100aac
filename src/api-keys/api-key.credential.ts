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
  claims: Claims
}

/**
 * Resolves `wb_…` keys for POST /tokens/verify from a cache of this instance (bounded, keyed by the
 * key's SHA-256), so a verify of a known key costs no database look-up. An entry lives at most 60 s
 * (the caller-cache window the specification allows, so a change made behind the service's back is
 * seen within it); a revocation through the service or the command line puts the key's `jti` on the
 * revocation list, which every instance checks on each hit and learns through the revocation feed.
 * Unknown keys are not remembered: a new key works at once.
 */
export function createApiKeyResolver(
  db: Db,
  clock: Clock,
  revocations: { isRevoked(jti: string): boolean | Promise<boolean> },
) {
  const cache = new Map<string, Cached>()
  // The claims of an answer carry iat/exp of the second they were made; one object per second and key.
  const claimsNow = (entry: Cached, now: number): Claims => {
    if (entry.claims.iat !== Math.floor(now / 1000)) entry.claims = apiKeyClaims(entry.key, now)
    return entry.claims
  }
  async function fetch(hash: string, plaintext: string, now: number): Promise<Claims | null> {
    const key = await findLiveApiKey(db, plaintext)
    if (!key) return null
    const revoked = await revocations.isRevoked(apiKeyJti(key.id))
    if (revoked) return null
    if (cache.size >= CACHED_KEYS) cache.delete(cache.keys().next().value!)
    const entry = { key, fetchedAt: now, claims: apiKeyClaims(key, now) }
    cache.set(hash, entry)
    return entry.claims
  }
  return {
    prefix: API_KEY_PREFIX,
    resolve(plaintext: string): Claims | null | Promise<Claims | null> {
      const hash = sha256Hex(plaintext)
      const now = clock.now()
      const entry = cache.get(hash)
      if (entry === undefined || now - entry.fetchedAt >= CLAIMS_WINDOW_SECONDS * 1000) {
        if (entry) cache.delete(hash)
        return fetch(hash, plaintext, now)
      }
      const revoked = revocations.isRevoked(apiKeyJti(entry.key.id))
      if (revoked === false) return claimsNow(entry, now)
      if (revoked === true) {
        cache.delete(hash)
        return null
      }
      return revoked.then((r) => (r ? null : claimsNow(entry, now)))
    },
  }
}

/** The scope of a verify credential: an API key a backend sends with its POST /tokens/verify calls. */
export const VERIFY_SCOPE = 'tokens:verify'

interface VerifyCredential {
  id: string
  jti: string
  fetchedAt: number
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
    const key = await findLiveApiKey(db, plaintext)
    if (!key?.scopes.includes(VERIFY_SCOPE)) return null
    const jti = apiKeyJti(key.id)
    if (await revocations.isRevoked(jti)) return null
    if (cache.size >= CACHED_KEYS) cache.delete(cache.keys().next().value!)
    const entry = { id: String(key.id), jti, fetchedAt: now }
    cache.set(plaintext, entry)
    return entry.id
  }
  return {
    known(plaintext) {
      if (!plaintext.startsWith(API_KEY_PREFIX)) return null
      const entry = cache.get(plaintext)
      if (entry === undefined) return undefined
      if (clock.now() - entry.fetchedAt >= CLAIMS_WINDOW_SECONDS * 1000) {
        cache.delete(plaintext)
        return undefined
      }
      const revoked = revocations.isRevoked(entry.jti)
      if (revoked === false) return entry.id
      if (revoked === true) {
        cache.delete(plaintext)
        return null
      }
      return revoked.then((r) => (r ? null : entry.id))
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
