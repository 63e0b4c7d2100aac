import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { Redis } from 'ioredis'
import type { Clock } from './clock.js'
import { TooManyRequestsError } from './errors.js'

/** A route's limit: at most `max` requests per address in each window of `windowMs`. */
export interface RouteLimit {
  max: number
  windowMs: number
  /**
   * With Redis counters, the route counts the request itself, in the same script call as its own
   * first Redis look-up (one round trip for both), from `request.deferredLimit`. With in-process
   * counters the onRequest hook counts as for any route.
   */
  countedByRoute?: boolean
}

/** A request's count, left to the route (see `RouteLimit.countedByRoute`). */
export interface DeferredLimit {
  /** The counter's Redis key. */
  readonly key: string
  readonly windowMs: number
  /**
   * Applies the count the route's script returned: sets the x-ratelimit headers and throws
   * TooManyRequestsError when over the limit. A count of null (the store failed) lets it through.
   */
  settle(count: number | null, resetInMs: number): void
  /** Counts with a call of its own, for a request the route has no script call for; then settles. */
  countAlone(): Promise<void>
  /** Whether the request was counted (settle or countAlone ran). */
  readonly settled: boolean
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set with `perMinute(n)`; a route without it is not limited. */
    rateLimit?: RouteLimit
  }
  interface FastifyRequest {
    /** Set for a route that counts its own request (`countedByRoute` with Redis counters). */
    deferredLimit: DeferredLimit | null
  }
}

/** Route config for a limit of `max` requests per address per minute. */
export function perMinute(max: number, opts: { countedByRoute?: boolean } = {}): { rateLimit: RouteLimit } {
  return { rateLimit: { max, windowMs: 60_000, ...opts } }
}

/**
 * Counts one request against `key` in a fixed window and calls back with the count so far in the
 * window and the milliseconds until it ends. A store may call back synchronously.
 */
export type CountFn = (
  key: string,
  windowMs: number,
  done: (err: Error | null, count: number, resetInMs: number) => void,
) => void

export interface CounterStore {
  count: CountFn
  /** Redis only: the key a count is kept under, for routes that count in their own script call. */
  redisKey?: (key: string) => string
}

/**
 * In-process counters, bounded (50,000 keys by default, about 7 MB when full): when `capacity` keys
 * are held, the key whose window began first is dropped (a Map keeps insertion order, and a key is
 * re-inserted when its window restarts). Under a
 * flood of more distinct addresses than that, an address that was dropped starts a fresh window;
 * memory never grows past the bound.
 */
export function memoryCounters(clock: Clock, capacity = 50_000): CounterStore {
  const windows = new Map<string, { count: number; endsAt: number }>()
  const count: CountFn = (key, windowMs, done) => {
    const now = clock.now()
    let w = windows.get(key)
    if (w === undefined || w.endsAt <= now) {
      if (w !== undefined) windows.delete(key)
      else if (windows.size >= capacity) windows.delete(windows.keys().next().value!)
      w = { count: 0, endsAt: now + windowMs }
      windows.set(key, w)
    }
    done(null, ++w.count, w.endsAt - now)
  }
  return { count }
}

/**
 * INCR and the window's expiry in one atomic step, as Lua for a script of Redis: KEYS[1] is the
 * counter, ARGV[1] the window; leaves `n` (the count) and `ttl` (ms until the window ends). A key left
 * without an expiry (an operator's SET) gets one, so no counter lives forever. Routes that count in
 * their own script start it with this text.
 */
export const COUNT_LUA = `
local n = redis.call('INCR', KEYS[1])
local ttl = -1
if n > 1 then ttl = redis.call('PTTL', KEYS[1]) end
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
`

interface RedisWithRateHit extends Redis {
  wristbandRateHit(key: string, windowMs: number): Promise<[number, number]>
}

/**
 * Counters in Redis, shared by every instance: one EVALSHA per request (auto-pipelined with whatever
 * else the same tick sends).
 */
export function redisCounters(redis: Redis, prefix: string): CounterStore {
  if (!('wristbandRateHit' in redis))
    redis.defineCommand('wristbandRateHit', { numberOfKeys: 1, lua: `${COUNT_LUA}return {n, ttl}` })
  const r = redis as RedisWithRateHit
  return {
    count: (key, windowMs, done) => {
      r.wristbandRateHit(prefix + key, windowMs).then(
        (res) => done(null, res[0], res[1]),
        (err: Error) => done(err, 0, 0),
      )
    },
    redisKey: (key) => prefix + key,
  }
}

export interface RateLimitOptions {
  /**
   * The counters of one route, called once per limited route: in-process counters should be a store
   * per route, so a flood of addresses on one route never evicts another route's counts (an attacker
   * could otherwise reset their login window by spraying verify); Redis counters can be one store.
   */
  countersFor: () => CounterStore
  /** Called for every refused request. */
  onExceeded?: (ip: string, route: string) => void
}

/**
 * Per-address, per-route limits. A route opts in with `config: perMinute(n)`; its limit is checked in
 * an `onRequest` hook, before the body is read. The address is `request.ip`, which Fastify takes from
 * X-Forwarded-For as TRUST_PROXY allows. Every limited answer carries `x-ratelimit-limit`,
 * `-remaining` and `-reset`; a refusal is 429 with `Retry-After`. When the counter store fails (Redis
 * unreachable) the request goes through without the headers; the Redis client logs the outage once.
 *
 * Written for this service rather than taken from @fastify/rate-limit: the hook is synchronous with
 * in-process counters (the plugin's chain of async functions and promises per request cost a fifth
 * of the throughput of POST /tokens/verify), and one Lua call per request with Redis.
 */
export function registerRateLimit(app: FastifyInstance, opts: RateLimitOptions): void {
  const { countersFor, onExceeded } = opts
  app.decorateRequest('deferredLimit', null)
  app.addHook('onRoute', (route) => {
    const limit = route.config?.rateLimit
    if (!limit) return
    const { max, windowMs } = limit
    const name = route.url
    const keyPrefix = `${String(route.method)} ${name}|`
    // Sets the headers of a count; the error to answer with when it is over the limit.
    const apply = (reply: FastifyReply, ip: string, count: number, resetInMs: number) => {
      const resetSeconds = Math.max(1, Math.ceil(resetInMs / 1000))
      reply.header('x-ratelimit-limit', max)
      reply.header('x-ratelimit-remaining', count < max ? max - count : 0)
      reply.header('x-ratelimit-reset', resetSeconds)
      if (count <= max) return null
      onExceeded?.(ip, name)
      return new TooManyRequestsError(max, resetSeconds)
    }
    const store = countersFor()
    const { redisKey } = store
    const hook =
      limit.countedByRoute && redisKey
        ? (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
            const ip = request.ip
            const settle = (count: number | null, resetInMs: number) => {
              deferred.settled = true
              if (count === null) return
              const err = apply(reply, ip, count, resetInMs)
              if (err) throw err
            }
            const deferred = {
              settled: false,
              key: redisKey(keyPrefix + ip),
              windowMs,
              settle,
              countAlone: () =>
                new Promise<void>((resolve, reject) => {
                  store.count(keyPrefix + ip, windowMs, (err, count, resetInMs) => {
                    try {
                      settle(err ? null : count, resetInMs)
                      resolve()
                    } catch (limited) {
                      reject(limited)
                    }
                  })
                }),
            }
            request.deferredLimit = deferred
            done()
          }
        : (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
            const ip = request.ip
            store.count(keyPrefix + ip, windowMs, (err, count, resetInMs) => {
              if (err) done()
              else done(apply(reply, ip, count, resetInMs) ?? undefined)
            })
          }
    const existing = route.onRequest
    route.onRequest =
      existing === undefined ? [hook] : Array.isArray(existing) ? [...existing, hook] : [existing, hook]
  })
}
