import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import type { Claims } from '../tokens/claims.js'
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

/** Resolves `wb_…` keys for POST /tokens/verify and partner authentication. */
export function apiKeyResolver(db: Db, clock: Clock) {
  return {
    prefix: API_KEY_PREFIX,
    async resolve(plaintext: string): Promise<Claims | null> {
      const key = await findLiveApiKey(db, plaintext)
      return key ? apiKeyClaims(key, clock.now()) : null
    },
  }
}
