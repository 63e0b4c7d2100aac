import { createHash } from 'node:crypto'
import { LRUCache } from 'lru-cache'

/** The claims wristband returns for a valid token (auth-service.md §5); further fields pass through. */
export interface VerifiedClaims {
  type: string
  sub: string
  role: string
  jti: string
  iat: number
  /** Epoch seconds; no cached answer outlives it. */
  exp: number
  aud?: string
  iss?: string
  event_ids?: number[]
  /** Event id (as a string) or "*" for every event, to the scopes held there. */
  permissions?: Record<string, string[]>
  [extra: string]: unknown
}

export type VerifierErrorKind = 'invalid' | 'unavailable'

/**
 * The only error `verify()` throws. `invalid` (401): the service said the token is not valid.
 * `unavailable` (503): the service could not give an answer (unreachable, timeout, 5xx, 429, garbled).
 */
export class VerifierError extends Error {
  readonly status: 401 | 503
  constructor(
    readonly kind: VerifierErrorKind,
    message: string,
    /** For `unavailable` after a 429/503 with Retry-After: seconds until the service is asked again. */
    readonly retryAfterSeconds?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options)
    this.name = 'VerifierError'
    this.status = kind === 'invalid' ? 401 : 503
  }
}

export interface VerifierOptions {
  /** Where wristband is served, e.g. `http://auth.internal:8000` (a path prefix is kept). */
  baseUrl: string | URL
  /** Budget for one call to the service, connection included. Default 2000. */
  timeoutMs?: number
  /** How long a valid answer is reused, at most 60 (the spec's limit). 0 turns caching off. Default 60. */
  cacheTtlSeconds?: number
  /** Cached answers kept at most; the least recently used go first. Default 10 000. */
  maxEntries?: number
  /** HTTP client; the global fetch (undici) when absent. */
  fetch?: typeof globalThis.fetch
  /** Epoch milliseconds; for tests that move time. */
  now?: () => number
}

export interface Verifier {
  /**
   * The claims of a valid token, frozen (they are shared with every caller presenting the same token);
   * otherwise throws a VerifierError. Never throws anything else.
   */
  verify(token: string): Promise<VerifiedClaims>
}

const MAX_CACHE_TTL_SECONDS = 60
/** When a 429 or 503 names no Retry-After, the service is still left alone this long. */
const DEFAULT_BACKOFF_MS = 1000

export function createVerifier(options: VerifierOptions): Verifier {
  const endpoint = verifyEndpoint(options.baseUrl)
  const timeoutMs = options.timeoutMs ?? 2000
  const ttlMs = (options.cacheTtlSeconds ?? MAX_CACHE_TTL_SECONDS) * 1000
  const maxEntries = options.maxEntries ?? 10_000
  const fetch = options.fetch ?? globalThis.fetch
  const now = options.now ?? Date.now
  if (!(timeoutMs > 0)) throw new RangeError('timeoutMs must be positive')
  if (!(ttlMs >= 0 && ttlMs <= MAX_CACHE_TTL_SECONDS * 1000))
    throw new RangeError(`cacheTtlSeconds must lie between 0 and ${MAX_CACHE_TTL_SECONDS}`)
  if (!(Number.isInteger(maxEntries) && maxEntries > 0))
    throw new RangeError('maxEntries must be a positive integer')

  // Keys are SHA-256 digests so the cache never holds a usable credential. ttlResolution 0: with an
  // injected clock a memoised "now" would let an entry outlive a moved clock by a tick.
  const cache = new LRUCache<string, VerifiedClaims>({
    max: maxEntries,
    ttl: Math.max(ttlMs, 1),
    ttlResolution: 0,
    perf: { now },
  })
  const inFlight = new Map<string, Promise<VerifiedClaims>>()
  /** Epoch ms before which the service asked (Retry-After) not to be called. */
  let quietUntil = 0

  async function ask(token: string, key: string): Promise<VerifiedClaims> {
    const res = await post(token)
    if (res.status === 429 || res.status === 503) {
      quietUntil = now() + retryAfterMs(res.headers.get('retry-after'), now())
      await res.body?.cancel()
      throw new VerifierError('unavailable', `verification service answered ${res.status}`, secondsLeft())
    }
    // 422/413: the service refused the value itself (e.g. longer than it accepts), so the token is bad.
    if (res.status === 422 || res.status === 413) {
      await res.body?.cancel()
      throw new VerifierError('invalid', 'token rejected')
    }
    if (res.status !== 200) {
      await res.body?.cancel()
      throw new VerifierError('unavailable', `verification service answered ${res.status}`)
    }
    const body = await readAnswer(res)
    if (!body.valid) throw new VerifierError('invalid', 'token is not valid')
    // One object serves every request that presents this token within the window, so no handler may
    // change what the next one sees (a pushed scope would otherwise be granted to later requests).
    const claims = deepFreeze(body.claims)
    const lifeMs = Math.min(ttlMs, claims.exp * 1000 - now())
    if (lifeMs > 0) cache.set(key, claims, { ttl: lifeMs })
    return claims
  }

  async function post(token: string): Promise<Response> {
    try {
      return await fetch(endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ token }),
        signal: AbortSignal.timeout(timeoutMs),
      })
    } catch (err) {
      const what = err instanceof Error && err.name === 'TimeoutError' ? 'timed out' : 'unreachable'
      throw new VerifierError('unavailable', `verification service ${what}`, undefined, { cause: err })
    }
  }

  function secondsLeft(): number {
    return Math.max(1, Math.ceil((quietUntil - now()) / 1000))
  }

  return {
    async verify(token) {
      if (typeof token !== 'string' || token === '') throw new VerifierError('invalid', 'no token')
      const key = createHash('sha256').update(token).digest('base64url')
      const hit = cache.get(key)
      if (hit) return hit
      const pending = inFlight.get(key)
      if (pending) return pending
      if (now() < quietUntil)
        throw new VerifierError('unavailable', 'verification service asked to wait', secondsLeft())
      const request = ask(token, key)
        .catch((err: unknown) => {
          if (err instanceof VerifierError) throw err
          throw new VerifierError('unavailable', 'verification failed', undefined, { cause: err })
        })
        .finally(() => inFlight.delete(key))
      inFlight.set(key, request)
      return request
    },
  }
}

function verifyEndpoint(baseUrl: string | URL): URL {
  const base = new URL(baseUrl)
  if (!base.pathname.endsWith('/')) base.pathname += '/'
  return new URL('tokens/verify', base)
}

/** Retry-After as delay-seconds or an HTTP date (RFC 9110 §10.2.3). */
function retryAfterMs(header: string | null, now: number): number {
  if (header === null) return DEFAULT_BACKOFF_MS
  const value = header.trim()
  if (/^\d+$/.test(value)) return Number(value) * 1000
  const at = Date.parse(value)
  return Number.isNaN(at) ? DEFAULT_BACKOFF_MS : Math.max(0, at - now)
}

type Answer = { valid: false } | { valid: true; claims: VerifiedClaims }

async function readAnswer(res: Response): Promise<Answer> {
  let body: unknown
  try {
    body = await res.json()
  } catch (err) {
    throw new VerifierError('unavailable', 'verification service sent no JSON', undefined, { cause: err })
  }
  if (isRecord(body) && body.valid === false) return { valid: false }
  if (isRecord(body) && body.valid === true && isRecord(body.claims) && typeof body.claims.exp === 'number')
    return { valid: true, claims: body.claims as VerifiedClaims }
  throw new VerifierError('unavailable', 'verification service sent an unexpected answer')
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const inner of Object.values(value)) deepFreeze(inner)
  }
  return value
}
