import { createHash } from 'node:crypto'
import { LRUCache } from 'lru-cache'

/** The claims wristband returns for a valid token (docs/specification.md); further fields pass through. */
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
 * `unavailable` (503): the service could not give an answer (unreachable, timeout, 5xx, garbled, or
 * still 429 once the check's retry budget was spent).
 */
export class VerifierError extends Error {
  readonly status: 401 | 503
  constructor(
    readonly kind: VerifierErrorKind,
    message: string,
    /** For `unavailable` after a 429/503 with Retry-After: the seconds the service asked to wait. */
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
  /**
   * The backend's verify credential: an API key with scope `tokens:verify` (`wristband apikey create
   * --scopes tokens:verify`, or POST /tokens/api-key), sent as `api_key` with every check. The service
   * then counts this backend's checks against the credential's own limit (VERIFY_CLIENT_RATE_LIMIT a
   * minute, 60,000 by default) instead of the 600 a minute of its address, which junk tokens sent
   * through it would soon spend.
   */
  credential?: string
  /** Budget for one call to the service, connection included. Default 2000. */
  timeoutMs?: number
  /**
   * How long an answer, valid or not, is reused, at most 60 (the spec's limit); never past a valid
   * token's `exp`, and a valid answer about an offline token (`type: "offline"`, a device's) for at
   * most 1 s, the service's revocation promise. 0 turns caching off. Default 60.
   */
  cacheTtlSeconds?: number
  /** Answers kept at most, valid and invalid ones each; the least recently used go first. Default 10 000. */
  maxEntries?: number
  /**
   * When the service answers 429 or 503, how long one check keeps retrying (with exponential back-off
   * and jitter) before it answers unavailable. Cached answers are served meanwhile. Default 2000.
   */
  retryBudgetMs?: number
  /** HTTP client; the global fetch (undici) when absent. */
  fetch?: typeof globalThis.fetch
  /** Epoch milliseconds; for tests that move time. */
  now?: () => number
  /** Waits between retries; for tests that move time. */
  sleep?: (ms: number) => Promise<void>
}

export interface Verifier {
  /**
   * The claims of a valid token, frozen (they are shared with every caller presenting the same token);
   * otherwise throws a VerifierError. Never throws anything else.
   */
  verify(token: string): Promise<VerifiedClaims>
}

const MAX_CACHE_TTL_SECONDS = 60
/**
 * The service's revocation promise: a revoked offline token (a lost scanner's, a disabled account's) is
 * refused everywhere within a second. Offline tokens live for days and are revoked as a matter of
 * course, so a valid answer about one is reused for no longer than this; access tokens (15 minutes)
 * keep the specification's 60 s.
 */
const OFFLINE_CACHE_MS = 1000
/** The longest token the service reads (its schema's maxLength); a longer one is refused locally. */
const MAX_TOKEN_LENGTH = 8192
/** The first wait after a 429 or 503, and the longest; each further refusal doubles it. */
const FIRST_BACKOFF_MS = 100
const MAX_BACKOFF_MS = 2000
/** The service's opaque credentials: API keys (`wb_…`) and session tokens (`wbs_…`). */
const OPAQUE_TOKEN = /^wb[a-z]*_[A-Za-z0-9_-]{16,}$/
const BASE64URL = /^[A-Za-z0-9_-]+$/

/** A cached refusal: invalid answers are remembered as valid ones are. */
const INVALID = Symbol('invalid')
type Cached = VerifiedClaims | typeof INVALID

export function createVerifier(options: VerifierOptions): Verifier {
  const endpoint = verifyEndpoint(options.baseUrl)
  const timeoutMs = options.timeoutMs ?? 2000
  const ttlMs = (options.cacheTtlSeconds ?? MAX_CACHE_TTL_SECONDS) * 1000
  const maxEntries = options.maxEntries ?? 10_000
  const retryBudgetMs = options.retryBudgetMs ?? 2000
  const fetch = options.fetch ?? globalThis.fetch
  const now = options.now ?? Date.now
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)))
  const credential = options.credential
  if (!(timeoutMs > 0)) throw new RangeError('timeoutMs must be positive')
  if (!(ttlMs >= 0 && ttlMs <= MAX_CACHE_TTL_SECONDS * 1000))
    throw new RangeError(`cacheTtlSeconds must lie between 0 and ${MAX_CACHE_TTL_SECONDS}`)
  if (!(Number.isInteger(maxEntries) && maxEntries > 0))
    throw new RangeError('maxEntries must be a positive integer')
  if (!(retryBudgetMs >= 0)) throw new RangeError('retryBudgetMs must not be negative')
  if (
    credential !== undefined &&
    (typeof credential !== 'string' || !OPAQUE_TOKEN.test(credential) || credential.length > 256)
  )
    throw new TypeError('credential must be a wristband API key (wb_…)')

  // Keys are SHA-256 digests so the cache never holds a usable credential. ttlResolution 0: with an
  // injected clock a memoised "now" would let an entry outlive a moved clock by a tick. Refusals have
  // a cache of their own, so a flood of junk tokens cannot push the valid answers out.
  const cacheOf = () =>
    new LRUCache<string, Cached>({
      max: maxEntries,
      ttl: Math.max(ttlMs, 1),
      ttlResolution: 0,
      perf: { now },
    })
  const valid = cacheOf()
  const invalid = cacheOf()
  const inFlight = new Map<string, Promise<VerifiedClaims>>()
  /**
   * Shared by every check: after a 429 or 503 nobody calls the service before `quietUntil`, and each
   * further refusal doubles the wait (reset by an answer). Checks wait for it within their budget
   * instead of failing at once.
   */
  let quietUntil = 0
  let backoffMs = 0
  /** The service's last Retry-After, in seconds, for the answer once a check's budget is spent. */
  let retryAfterSeconds: number | undefined
  /**
   * Until when checks go without the credential: a service of the release before verify credentials
   * refuses a body with `api_key` (422). Its checks then go anonymous for a minute, and the credential
   * is tried again, so a rolled-back service costs the budget, never the users.
   */
  let anonymousUntil = 0

  async function ask(token: string, key: string): Promise<VerifiedClaims> {
    let waited = 0
    for (;;) {
      const wait = quietUntil - now()
      if (wait > 0) {
        if (waited + wait > retryBudgetMs)
          throw new VerifierError('unavailable', 'verification service asked to wait', retryAfterSeconds)
        await sleep(wait)
        waited += wait
      }
      const withCredential = credential !== undefined && now() >= anonymousUntil
      const res = await post(token, withCredential)
      if (res.status === 422 && withCredential) {
        await res.body?.cancel()
        anonymousUntil = now() + 60_000
        continue
      }
      if (res.status === 429 || res.status === 503) {
        await res.body?.cancel()
        retryAfterSeconds = retryAfter(res.headers.get('retry-after'), now())
        backoffMs = Math.min(MAX_BACKOFF_MS, backoffMs === 0 ? FIRST_BACKOFF_MS : backoffMs * 2)
        // Full jitter between half and all of the back-off, so the waiting checks do not return together.
        quietUntil = Math.max(quietUntil, now() + backoffMs * (0.5 + Math.random() / 2))
        continue
      }
      backoffMs = 0
      return answer(res, key)
    }
  }

  async function answer(res: Response, key: string): Promise<VerifiedClaims> {
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
    if (!body.valid) {
      if (ttlMs > 0) invalid.set(key, INVALID)
      throw new VerifierError('invalid', 'token is not valid')
    }
    // One object serves every request that presents this token within the window, so no handler may
    // change what the next one sees (a pushed scope would otherwise be granted to later requests).
    const claims = deepFreeze(body.claims)
    const capMs = claims.type === 'offline' ? Math.min(ttlMs, OFFLINE_CACHE_MS) : ttlMs
    const lifeMs = Math.min(capMs, claims.exp * 1000 - now())
    if (lifeMs > 0) valid.set(key, claims, { ttl: lifeMs })
    return claims
  }

  async function post(token: string, withCredential: boolean): Promise<Response> {
    try {
      return await fetch(endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(withCredential ? { token, api_key: credential } : { token }),
        signal: AbortSignal.timeout(timeoutMs),
      })
    } catch (err) {
      const what = err instanceof Error && err.name === 'TimeoutError' ? 'timed out' : 'unreachable'
      throw new VerifierError('unavailable', `verification service ${what}`, undefined, { cause: err })
    }
  }

  return {
    async verify(token) {
      if (typeof token !== 'string' || token === '') throw new VerifierError('invalid', 'no token')
      if (token.length > MAX_TOKEN_LENGTH)
        throw new VerifierError('invalid', 'token longer than the service reads')
      const key = createHash('sha256').update(token).digest('base64url')
      const hit = valid.get(key)
      if (hit !== undefined && hit !== INVALID) return hit
      if (invalid.has(key)) throw new VerifierError('invalid', 'token is not valid')
      refuseLocally(token, now())
      const pending = inFlight.get(key)
      if (pending) return pending
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

/**
 * Throws for a token the service would call invalid whatever it is asked: one that is no JWS
 * (three base64url parts whose header and payload are JSON objects) nor one of its opaque
 * credentials (`wb…_` and at least 16 base64url characters), and a JWS whose `exp` has passed. A junk
 * token then costs the backend no request and the service's limit nothing. A forged token that
 * passes goes to the service, which alone checks signatures and revocations.
 */
function refuseLocally(token: string, nowMs: number): void {
  if (OPAQUE_TOKEN.test(token)) return
  const parts = token.split('.')
  if (parts.length !== 3 || !parts.every((p) => BASE64URL.test(p)))
    throw new VerifierError('invalid', 'token is malformed')
  const header = decodeJson(parts[0]!)
  const payload = decodeJson(parts[1]!)
  if (!isRecord(header) || typeof header.alg !== 'string' || !isRecord(payload))
    throw new VerifierError('invalid', 'token is malformed')
  if (typeof payload.exp === 'number' && payload.exp * 1000 <= nowMs)
    throw new VerifierError('invalid', 'token has expired')
}

function decodeJson(part: string): unknown {
  try {
    return JSON.parse(Buffer.from(part, 'base64url').toString('utf8'))
  } catch {
    return undefined
  }
}

function verifyEndpoint(baseUrl: string | URL): URL {
  const base = new URL(baseUrl)
  if (!base.pathname.endsWith('/')) base.pathname += '/'
  return new URL('tokens/verify', base)
}

/** Retry-After (delay-seconds or an HTTP date, RFC 9110 §10.2.3) in whole seconds, at least 1. */
function retryAfter(header: string | null, now: number): number | undefined {
  if (header === null) return undefined
  const value = header.trim()
  const ms = /^\d+$/.test(value) ? Number(value) * 1000 : Date.parse(value) - now
  return Number.isNaN(ms) ? undefined : Math.max(1, Math.ceil(ms / 1000))
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
