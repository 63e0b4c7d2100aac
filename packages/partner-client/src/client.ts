import { randomUUID } from 'node:crypto'
import createClient, { type Client } from 'openapi-fetch'
import { IDEMPOTENT_POSTS } from './generated/idempotent-posts.js'
import type { components, paths } from './generated/openapi.js'

export type PartnerPaths = paths
export type Schemas = components['schemas']
export type PartnerClient = Client<paths>

export interface RetryOptions {
  /** Attempts after the first; 0 turns retries off. Default 3. */
  retries?: number
  /** First back-off without a Retry-After, doubled each attempt (with jitter). Default 500 ms. */
  baseDelayMs?: number
  /** No back-off (without Retry-After) is longer than this. Default 30 s. */
  maxDelayMs?: number
  /**
   * A `Retry-After` up to this long is waited in full before the next attempt; a longer one is not
   * retried (the answer comes back, as a `RateLimitedError`). Default 120 s, so the service's
   * per-minute windows (`Retry-After: 60`) are waited out rather than retried too early.
   */
  maxRetryAfterMs?: number
}

export interface PartnerClientOptions {
  /** The service's address, e.g. `https://wristband.example.com`. */
  baseUrl: string
  /** The event's API key (sent in the `api_key` header). */
  apiKey: string
  retry?: RetryOptions
  /** Makes an Idempotency-Key for a POST sent without one. Default: a random UUID. */
  idempotencyKey?: () => string
  /** The fetch to use (default: the global one). */
  fetch?: typeof globalThis.fetch
  /** How to wait between attempts (tests pass one that records the delays). */
  sleep?: (ms: number) => Promise<void>
}

/** Statuses worth another attempt: the service asked to slow down, or was briefly unavailable. */
const RETRY_STATUSES = new Set([429, 503])
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE'])

/**
 * Whether sending the request twice does what sending it once does: the HTTP-idempotent methods, and
 * the POSTs the service deduplicates by Idempotency-Key (read from the OpenAPI document).
 */
export function isIdempotent(method: string, url: URL, baseUrl: URL): boolean {
  if (SAFE_METHODS.has(method)) return true
  if (method !== 'POST') return false
  const base = baseUrl.pathname.replace(/\/$/, '')
  return IDEMPOTENT_POSTS.includes(url.pathname.slice(base.length))
}

/** Retry-After (seconds or an HTTP date) in milliseconds, or undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined
  const v = value.trim()
  if (/^\d+$/.test(v)) return Number(v) * 1000
  const at = Date.parse(v)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

/**
 * The wait before attempt `attempt` (1 = the first retry): what Retry-After says, in full (the caller
 * gives up when it is over `maxRetryAfterMs`), else an exponential back-off up to `maxDelayMs`.
 */
export function backoffMs(
  attempt: number,
  retryAfter: number | undefined,
  opts: Pick<Required<RetryOptions>, 'baseDelayMs' | 'maxDelayMs'>,
): number {
  if (retryAfter !== undefined) return retryAfter
  const exp = opts.baseDelayMs * 2 ** (attempt - 1)
  // Full jitter on the upper half, so clients that failed together don't retry together.
  return Math.min(exp / 2 + Math.random() * (exp / 2), opts.maxDelayMs)
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * A fetch that retries an idempotent request answered 429 or 503 (or not answered at all), waiting what
 * Retry-After says, else an exponential back-off. Anything else is returned as it came.
 */
function retryingFetch(opts: PartnerClientOptions): (request: Request) => Promise<Response> {
  const baseFetch = opts.fetch ?? globalThis.fetch
  const sleep = opts.sleep ?? defaultSleep
  const retry: Required<RetryOptions> = {
    retries: opts.retry?.retries ?? 3,
    baseDelayMs: opts.retry?.baseDelayMs ?? 500,
    maxDelayMs: opts.retry?.maxDelayMs ?? 30_000,
    maxRetryAfterMs: opts.retry?.maxRetryAfterMs ?? 120_000,
  }
  const base = new URL(opts.baseUrl)
  return async (request) => {
    const idempotent = isIdempotent(request.method, new URL(request.url), base)
    const attempts = idempotent ? retry.retries + 1 : 1
    for (let attempt = 1; ; attempt++) {
      // A body can be read once: each attempt sends a copy.
      const sent = attempt < attempts ? request.clone() : request
      let response: Response
      try {
        response = await baseFetch(sent)
      } catch (err) {
        if (attempt >= attempts) throw err
        await sleep(backoffMs(attempt, undefined, retry))
        continue
      }
      if (!RETRY_STATUSES.has(response.status) || attempt >= attempts) return response
      const retryAfter = retryAfterMs(response.headers.get('retry-after'))
      // Longer than the caller is willing to wait: trying earlier would only be refused again.
      if (retryAfter !== undefined && retryAfter > retry.maxRetryAfterMs) return response
      const wait = backoffMs(attempt, retryAfter, retry)
      await response.body?.cancel()
      await sleep(wait)
    }
  }
}

/**
 * The partner API client: every call of the OpenAPI document, typed (`client.POST('/companies/ticket',
 * { body })` answers `{ data, error, response }`). It sends the API key, gives every POST an
 * Idempotency-Key (a new one unless the call passes its own header), and retries idempotent calls on
 * 429 and 503. Wrap a call in `unwrap()` to get its data or a thrown `PartnerApiError`.
 */
export function createPartnerClient(opts: PartnerClientOptions): PartnerClient {
  const newKey = opts.idempotencyKey ?? randomUUID
  const client = createClient<paths>({ baseUrl: opts.baseUrl, fetch: retryingFetch(opts) })
  client.use({
    onRequest({ request }) {
      request.headers.set('api_key', opts.apiKey)
      if (request.method === 'POST' && !request.headers.has('idempotency-key'))
        request.headers.set('idempotency-key', newKey())
      return request
    },
  })
  return client
}
