import type { Claims } from '../tokens/claims.js'
import type { CredentialLookup } from '../tokens/verify-callers.js'
import { type ApiKeyCache, type CachedKey, KEY_CACHE_WINDOW_MS } from './api-key-cache.js'
import type { ApiKeyRecord } from './api-keys.store.js'

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
    exp: iat + KEY_CACHE_WINDOW_MS / 1000,
    event_ids: [key.event_id],
    permissions: { [String(key.event_id)]: key.scopes },
  }
}

/** The claims of a key's answer, made once per second and key (they carry iat/exp of that second). */
function claimsOf(entry: CachedKey | null, now: number): Claims | null {
  if (entry === null) return null
  const memo = entry.memo as Claims | undefined
  if (memo?.iat === Math.floor(now / 1000)) return memo
  const claims = apiKeyClaims(entry.key, now)
  entry.memo = claims
  return claims
}

/** The `wb_…` credential of the token guard: POST /tokens/verify answers an API key with its claims. */
export function apiKeyCredential(keys: ApiKeyCache, clock: { now(): number }) {
  return (plaintext: string): Claims | null | Promise<Claims | null> => {
    const found = keys.find(plaintext)
    if (found instanceof Promise) return found.then((entry) => claimsOf(entry, clock.now()))
    return claimsOf(found, clock.now())
  }
}

/** The scope of a verify credential: an API key a backend sends with its POST /tokens/verify calls. */
export const VERIFY_SCOPE = 'tokens:verify'

const credentialId = (entry: CachedKey | null): string | null =>
  entry?.key.scopes.includes(VERIFY_SCOPE) ? entry.id : null

/**
 * Tells POST /tokens/verify (its route and its lane) which verify credential a presented `api_key`
 * is: the key's id when it is a live API key with scope `tokens:verify`, else null (its requests then
 * count against the address). A backend sends its key with each call, so the look-up is the key cache's
 * map read on every request but the first of a key in a minute.
 */
export function verifyCredentials(keys: ApiKeyCache): CredentialLookup {
  return {
    known(plaintext) {
      const found = keys.known(plaintext)
      if (found === undefined) return undefined
      if (found instanceof Promise) return found.then(credentialId)
      return credentialId(found)
    },
    fetch: (plaintext) => keys.fetch(plaintext).then(credentialId),
  }
}
