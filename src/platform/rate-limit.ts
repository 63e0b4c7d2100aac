import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { Redis } from 'ioredis'
import { addressKey } from './client-address.js'
import type { Clock } from './clock.js'
import { TooManyRequestsError } from './errors.js'

/** A route's limit: at most `max` requests per address in each window of `windowMs`. */
export interface RouteLimit {
  max: number
  windowMs: number
  /** Limits per credential besides per address: see `perCredential`. */
  credential?: CredentialLimit
}

/**
 * A limit per credential (an API key): `of` names the request's valid credential, or answers
 * undefined for a request without one (missing, unknown or revoked). A request with a valid credential
 * counts against `max` of that credential, whatever its address; one without counts against the
 * route's limit per address. Answers of such routes carry the IETF `RateLimit-Limit`, `-Remaining` and
 * `-Reset` headers besides `x-ratelimit-*`.
 */
export interface CredentialLimit {
  /** Routes with the same name share one budget per credential (a partner key's, over every partner route). */
  name: string
  max: number
  of: (request: FastifyRequest) => string | undefined | Promise<string | undefined>
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set with `perMinute(n)`; a route without it is not limited. */
    rateLimit?: RouteLimit
  }
}

/**
 * Limits of this many requests a minute or fewer are counted in Redis on every request, exactly across
 * a fleet: at such rates the round trip costs nothing, and a background sync's lag (instances × sync
 * interval × rate) would be most of the limit, e.g. the eleventh failed login let through.
 */
export const EXACT_LIMIT_PER_MINUTE = 60

/** Whether a limit is counted exactly (see EXACT_LIMIT_PER_MINUTE). */
export function countedExactly(limit: RouteLimit): boolean {
  return limit.max * (60_000 / limit.windowMs) <= EXACT_LIMIT_PER_MINUTE
}

/** Route config for a limit of `max` requests per address per minute. */
export function perMinute(max: number): { rateLimit: RouteLimit } {
  return { rateLimit: { max, windowMs: 60_000 } }
}

/**
 * Route config for `credential.max` requests per minute per credential, and `perAddress` per minute
 * per address for requests without a valid credential.
 */
export function perCredential(perAddress: number, credential: CredentialLimit): { rateLimit: RouteLimit } {
  return { rateLimit: { max: perAddress, windowMs: 60_000, credential } }
}

/**
 * The counters of one route. `hit` counts one request of `key` in a fixed window and answers the
 * count so far in the window: synchronously when the counts are kept in this process (then
 * `resetInMs` holds the time left of that window until the next call; no object is made per
 * request), or as a promise of `[count, resetInMs]` with exact counting in Redis. A count of -1 means
 * the store failed; the request then goes through.
 */
export interface CounterStore {
  hit(key: string, windowMs: number): number | Promise<[number, number]>
  resetInMs: number
  stop?(): void
}

/**
 * A bounded table of fixed windows, one slot per key, that allocates nothing when a key is found:
 * counts and window ends live in typed arrays and the slot of a key in a Map. Slots are kept in the
 * order their windows began (a doubly linked list over slot numbers, a key moved to the end when its
 * window restarts); when `capacity` keys are held, the key whose window began first gives up its slot.
 */
class WindowTable {
  readonly slots = new Map<string, number>()
  keys: (string | undefined)[] = []
  counts = new Int32Array(0)
  ends = new Float64Array(0)
  /** Per slot, for the Redis-synced store: counted here and not yet sent, and the total Redis last said. */
  pending = new Int32Array(0)
  shared = new Int32Array(0)
  private prev = new Int32Array(0)
  private next = new Int32Array(0)
  private head = -1
  private tail = -1
  private used = 0

  constructor(private readonly capacity: number) {}

  /** The slot of `key` with a window running at `now` (a fresh one when it had none, or it ended). */
  slot(key: string, now: number, windowEndsAt: number): number {
    let i = this.slots.get(key)
    if (i !== undefined) {
      if (this.ends[i]! > now) return i
      this.unlink(i)
    } else if (this.used < this.capacity) {
      i = this.used++
      if (i >= this.counts.length) this.grow()
      this.keys[i] = key
      this.slots.set(key, i)
    } else {
      i = this.head
      this.unlink(i)
      this.slots.delete(this.keys[i]!)
      this.keys[i] = key
      this.slots.set(key, i)
    }
    this.counts[i] = 0
    this.pending[i] = 0
    this.shared[i] = 0
    this.ends[i] = windowEndsAt
    this.append(i)
    return i
  }

  private grow() {
    const size = Math.min(this.capacity, Math.max(1024, this.counts.length * 2))
    const copy = <T extends Int32Array | Float64Array>(old: T, make: (n: number) => T) => {
      const next = make(size)
      next.set(old)
      return next
    }
    const int = (n: number) => new Int32Array(n)
    this.counts = copy(this.counts, int)
    this.pending = copy(this.pending, int)
    this.shared = copy(this.shared, int)
    this.prev = copy(this.prev, int)
    this.next = copy(this.next, int)
    this.ends = copy(this.ends, (n) => new Float64Array(n))
  }

  private unlink(i: number) {
    const p = this.prev[i]!
    const n = this.next[i]!
    if (p === -1) this.head = n
    else this.next[p] = n
    if (n === -1) this.tail = p
    else this.prev[n] = p
  }

  private append(i: number) {
    this.prev[i] = this.tail
    this.next[i] = -1
    if (this.tail === -1) this.head = i
    else this.next[this.tail] = i
    this.tail = i
  }
}

/**
 * In-process counters of one route, bounded (100,000 addresses by default, about 12 MB when full,
 * so 65,536 addresses rotating through never evict each other): under a flood of more distinct
 * addresses than that, an address that lost its slot starts a fresh window; memory never grows past
 * the bound.
 */
export function memoryCounters(clock: Clock, capacity = 100_000): CounterStore {
  const table = new WindowTable(capacity)
  const store: CounterStore = {
    resetInMs: 0,
    hit(key, windowMs) {
      const now = clock.now()
      const i = table.slot(key, now, now + windowMs)
      store.resetInMs = table.ends[i]! - now
      return ++table.counts[i]!
    },
  }
  return store
}

/**
 * INCR and the window's expiry in one atomic step: KEYS[1] is the counter, ARGV[1] the window. A key
 * left without an expiry (an operator's SET) gets one, so no counter lives forever.
 */
const COUNT_LUA = `
local n = redis.call('INCR', KEYS[1])
local ttl = -1
if n > 1 then ttl = redis.call('PTTL', KEYS[1]) end
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}
`

interface RedisWithRateHit extends Redis {
  wristbandRateHit(key: string, windowMs: number): Promise<[number, number]>
}

/**
 * Exact counters in Redis, shared by every instance (RATE_LIMIT_SYNC_MS=0): one EVALSHA per request
 * (auto-pipelined with whatever else the same tick sends).
 */
export function redisCounters(redis: Redis, prefix: string): CounterStore {
  if (!('wristbandRateHit' in redis))
    redis.defineCommand('wristbandRateHit', { numberOfKeys: 1, lua: COUNT_LUA })
  const r = redis as RedisWithRateHit
  return {
    resetInMs: 0,
    hit: (key, windowMs) =>
      r.wristbandRateHit(prefix + key, windowMs).catch(() => [-1, 0] as [number, number]),
  }
}

/**
 * Adds each count to its KEYS counter and answers the new totals; a counter made by this call expires
 * at its window's end. ARGV[1] holds `count,expiry,` for each key in turn (expiry in ms since the
 * epoch): one string instead of two arguments per key, which the client would encode one by one.
 */
const SYNC_LUA = `
local out = {}
local i = 0
for by, at in string.gmatch(ARGV[1], '(%d+),(%d+),') do
  i = i + 1
  local n = redis.call('INCRBY', KEYS[i], by)
  if n == tonumber(by) then redis.call('PEXPIREAT', KEYS[i], at) end
  out[i] = n
end
return out
`
const SYNC_BATCH = 1000

interface Sent {
  i: number
  n: number
  endsAt: number
  key: string
}

interface RedisWithRateSync extends Redis {
  wristbandRateSync(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<number[]>
}

/**
 * Counters shared through Redis without a round trip per request (Kong's `sync_rate`): each instance
 * counts in its own table, and every `syncMs` adds what it counted to Redis (INCRBY of the window's
 * key) and learns the total of every instance from the answer. Windows are aligned to the clock
 * (the window of a request is `floor(now / windowMs)`), so instances agree on them without talking.
 *
 * An instance's view of the others lags by at most one sync interval (and a round trip), so a shared
 * limit is exceeded by at most instances × `syncMs` × the request rate of the address; an instance
 * alone never lets more than the limit through. While Redis is unreachable, limits fail open, as they
 * do with exact counting.
 */
export function syncedRedisCounters(
  redis: Redis,
  prefix: string,
  clock: Clock,
  syncMs: number,
  capacity = 100_000,
): CounterStore {
  if (!('wristbandRateSync' in redis)) redis.defineCommand('wristbandRateSync', { lua: SYNC_LUA })
  const r = redis as RedisWithRateSync
  const table = new WindowTable(capacity)
  // Slots with counts not yet sent; a slot is listed once (pending goes from 0 to 1).
  const dirty: number[] = []
  let syncing = false
  async function send(batch: Sent[]) {
    const keys: string[] = []
    let counts = ''
    for (const s of batch) {
      keys.push(`${prefix}${s.key}|${s.endsAt}`)
      counts += `${s.n},${s.endsAt + 1000},`
    }
    let totals: number[] | null
    try {
      totals = await r.wristbandRateSync(keys.length, ...keys, counts)
    } catch {
      totals = null
    }
    batch.forEach((s, n) => {
      // The slot went to another key or window meanwhile: what was sent belonged to the old one.
      if (table.keys[s.i] !== s.key || table.ends[s.i] !== s.endsAt) return
      if (totals) {
        table.pending[s.i] = table.pending[s.i]! - s.n
        table.shared[s.i] = totals[n]!
      }
      if (table.pending[s.i]! > 0) dirty.push(s.i)
    })
  }
  async function sync() {
    if (syncing || dirty.length === 0) return
    syncing = true
    // A slot may be listed twice (its window restarted while listed): it is sent once.
    const slots = [...new Set(dirty.splice(0))]
    const sent = slots.map((i) => ({ i, n: table.pending[i]!, endsAt: table.ends[i]!, key: table.keys[i]! }))
    try {
      // One script call per batch of keys, not a command per key: with many addresses (each seen once
      // or twice per interval) the client's per-command cost would be the cost of the old design.
      const batches: Promise<void>[] = []
      for (let i = 0; i < sent.length; i += SYNC_BATCH) batches.push(send(sent.slice(i, i + SYNC_BATCH)))
      await Promise.all(batches)
    } finally {
      syncing = false
    }
  }
  const timer = setInterval(() => void sync(), syncMs)
  timer.unref()
  const store: CounterStore = {
    resetInMs: 0,
    hit(key, windowMs) {
      // Redis unreachable: limits fail open, as with exact counting (the outage is logged once).
      if (redis.status !== 'ready') return -1
      const now = clock.now()
      const i = table.slot(key, now, (Math.floor(now / windowMs) + 1) * windowMs)
      store.resetInMs = table.ends[i]! - now
      table.counts[i]!++
      if (table.pending[i]!++ === 0) dirty.push(i)
      // What this instance counted since Redis last answered, on top of the total Redis gave.
      const unsent = table.pending[i]!
      const known = table.shared[i]!
      return known === 0 ? table.counts[i]! : Math.max(table.counts[i]!, known + unsent)
    },
    stop: () => clearInterval(timer),
  }
  return store
}

/** One limiter: its limit and its counters (a route's, or one a route applies itself). */
export interface RouteLimiter {
  readonly max: number
  readonly windowMs: number
  readonly store: CounterStore
  /** Called for every refused request. */
  exceeded(ip: string): void
}

/** Seconds until a window ends, at least 1: `x-ratelimit-reset` and `Retry-After`. */
export function resetSeconds(resetInMs: number): number {
  return Math.max(1, Math.ceil(resetInMs / 1000))
}

export interface RateLimitOptions {
  /**
   * The counters of one route (`route` names it, e.g. `POST /auth/login`), called once per limited
   * route: in-process counters must be a table per route, so a flood of addresses on one route never
   * evicts another route's counts (an attacker could otherwise reset their login window by spraying
   * verify).
   */
  countersFor: (route: string, limit: RouteLimit) => CounterStore
  /** Called for every refused request. */
  onExceeded?: (ip: string, route: string) => void
}

/** The `x-ratelimit-*` headers of a count, as name, value, name, value…: every limited answer's. */
export function rateLimitHeaders(max: number, count: number, resetInMs: number): string[] {
  return [
    'x-ratelimit-limit',
    String(max),
    'x-ratelimit-remaining',
    String(count < max ? max - count : 0),
    'x-ratelimit-reset',
    String(resetSeconds(resetInMs)),
  ]
}

/**
 * Writes a count's headers on a reply; the error to answer with when it is over the limit (after
 * telling the limiter, which audits and counts the refusal).
 */
export function applyCount(
  reply: FastifyReply,
  limiter: RouteLimiter,
  ip: string,
  count: number,
  resetInMs: number,
  /** Also the IETF `RateLimit-Limit`, `-Remaining` and `-Reset` (routes limited per credential). */
  ietf = false,
): TooManyRequestsError | undefined {
  const headers = rateLimitHeaders(limiter.max, count, resetInMs)
  for (let i = 0; i < headers.length; i += 2) {
    reply.header(headers[i]!, headers[i + 1])
    if (ietf) reply.header(headers[i]!.slice(2), headers[i + 1])
  }
  if (count <= limiter.max) return undefined
  limiter.exceeded(ip)
  return new TooManyRequestsError(limiter.max, resetSeconds(resetInMs))
}

/** The limits of an app: one limiter per limited route, and more for limits a route applies itself. */
export interface RateLimits {
  /** The limiters of the routes with `config.rateLimit`, by route (`METHOD url`). */
  readonly routes: Map<string, RouteLimiter>
  /**
   * A limiter of its own (`name` keeps its counters apart from every other's), for a route that
   * counts by something other than the address or only once it read the body (POST /tokens/verify).
   */
  limiter(name: string, limit: RouteLimit): RouteLimiter
}

/**
 * Per-address, per-route limits. A route opts in with `config: perMinute(n)`; its limit is checked in
 * an `onRequest` hook, before the body is read. The address is `request.ip`, which Fastify takes from
 * X-Forwarded-For as TRUST_PROXY allows, counted under its `addressKey` (an IPv6 address by its /64). Every limited answer carries `x-ratelimit-limit`,
 * `-remaining` and `-reset`; a refusal is 429 with `Retry-After`. When the counter store fails (Redis
 * unreachable) the request goes through without the headers; the Redis client logs the outage once.
 *
 * Written for this service rather than taken from @fastify/rate-limit: the hook is synchronous with
 * in-process (and Redis-synced) counters and allocates nothing per request but its headers; the plugin's chain of
 * async functions and promises per request cost a fifth of the throughput of POST /tokens/verify.
 */
export function registerRateLimit(app: FastifyInstance, opts: RateLimitOptions): RateLimits {
  const { countersFor, onExceeded } = opts
  const routes = new Map<string, RouteLimiter>()
  const stores: CounterStore[] = []
  const credentialStores = new Map<string, CounterStore>()
  app.addHook('onClose', async () => {
    for (const s of stores) s.stop?.()
  })
  // `counters` names the counters, `label` the limit in metrics and the audit (a route's path).
  const make = (counters: string, label: string, limit: RouteLimit): RouteLimiter => {
    const store = countersFor(counters, limit)
    stores.push(store)
    return { max: limit.max, windowMs: limit.windowMs, store, exceeded: (ip) => onExceeded?.(ip, label) }
  }
  const limiter = (name: string, limit: RouteLimit) => make(name, name, limit)
  app.addHook('onRoute', (route) => {
    const limit = route.config?.rateLimit
    if (!limit) return
    const name = `${String(route.method)} ${route.url}`
    const routeLimiter = make(name, route.url, limit)
    routes.set(name, routeLimiter)
    const { credential } = limit
    // Routes with one credential limit's name share its counters (a partner key's budget spans them).
    let byCredential: RouteLimiter | undefined
    if (credential) {
      let store = credentialStores.get(credential.name)
      if (!store) {
        store = countersFor(`credential ${credential.name}`, {
          max: credential.max,
          windowMs: limit.windowMs,
        })
        credentialStores.set(credential.name, store)
        stores.push(store)
      }
      byCredential = { max: credential.max, windowMs: limit.windowMs, store, exceeded: routeLimiter.exceeded }
    }
    const ietf = credential !== undefined
    /** Counts one request of `key` under `limiter` and answers (done) with its outcome. */
    const count = (
      limiter: RouteLimiter,
      key: string,
      reply: FastifyReply,
      ip: string,
      done: HookHandlerDoneFunction,
    ) => {
      const n = limiter.store.hit(key, limiter.windowMs)
      if (typeof n === 'number') {
        done(n < 0 ? undefined : applyCount(reply, limiter, ip, n, limiter.store.resetInMs, ietf))
        return
      }
      n.then(([c, resetInMs]) => done(c < 0 ? undefined : applyCount(reply, limiter, ip, c, resetInMs, ietf)))
    }
    const hook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
      const ip = request.ip
      if (credential && byCredential) {
        // A valid credential counts on its own; anything else per address.
        const limiter = byCredential
        Promise.resolve(credential.of(request)).then(
          (id) =>
            id === undefined
              ? count(routeLimiter, addressKey(ip), reply, ip, done)
              : count(limiter, id, reply, ip, done),
          (err: Error) => done(err),
        )
        return
      }
      count(routeLimiter, addressKey(ip), reply, ip, done)
    }
    const existing = route.onRequest
    route.onRequest =
      existing === undefined ? [hook] : Array.isArray(existing) ? [...existing, hook] : [existing, hook]
  })
  return { routes, limiter }
}
