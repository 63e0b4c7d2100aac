import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { Redis } from 'ioredis'
import type { Clock } from './clock.js'
import { TooManyRequestsError } from './errors.js'

/** A route's limit: at most `max` requests per address in each window of `windowMs`. */
export interface RouteLimit {
  max: number
  windowMs: number
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set with `perMinute(n)`; a route without it is not limited. */
    rateLimit?: RouteLimit
  }
}

/** Route config for a limit of `max` requests per address per minute. */
export function perMinute(max: number): { rateLimit: RouteLimit } {
  return { rateLimit: { max, windowMs: 60_000 } }
}

/**
 * Counts one request against `key` in a fixed window and calls back with the count so far in the
 * window and the milliseconds until it ends. A store may call back synchronously.
 */
export type CounterStore = (
  key: string,
  windowMs: number,
  done: (err: Error | null, count: number, resetInMs: number) => void,
) => void

/**
 * In-process counters, bounded: when `capacity` keys are held, the key whose window began first is
 * dropped (a Map keeps insertion order, and a key is re-inserted when its window restarts). Under a
 * flood of more distinct addresses than that, an address that was dropped starts a fresh window;
 * memory never grows past the bound.
 */
export function memoryCounters(clock: Clock, capacity = 100_000): CounterStore {
  const windows = new Map<string, { count: number; endsAt: number }>()
  return (key, windowMs, done) => {
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
}

// INCR and the window's expiry in one atomic step. A key left without an expiry (a crash between the
// two calls cannot happen inside a script, but an operator's SET could) gets one, so no counter lives
// forever.
const HIT_SCRIPT = `
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
  wristbandRateHit(
    key: string,
    windowMs: number,
    cb: (err: Error | null, res?: [number, number]) => void,
  ): void
}

/**
 * Counters in Redis, shared by every instance: one EVALSHA per request (auto-pipelined with whatever
 * else the same tick sends).
 */
export function redisCounters(redis: Redis, prefix: string): CounterStore {
  if (!('wristbandRateHit' in redis))
    redis.defineCommand('wristbandRateHit', { numberOfKeys: 1, lua: HIT_SCRIPT })
  const r = redis as RedisWithRateHit
  return (key, windowMs, done) => {
    r.wristbandRateHit(`${prefix}${key}`, windowMs, (err, res) => {
      if (err || !res) done(err ?? new Error('no answer'), 0, 0)
      else done(null, res[0], res[1])
    })
  }
}

export interface RateLimitOptions {
  store: CounterStore
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
  const { store, onExceeded } = opts
  app.addHook('onRoute', (route) => {
    const limit = route.config?.rateLimit
    if (!limit) return
    const { max, windowMs } = limit
    const name = route.url
    const keyPrefix = `${String(route.method)} ${name}|`
    const hook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
      const ip = request.ip
      store(keyPrefix + ip, windowMs, (err, count, resetInMs) => {
        if (err) {
          done()
          return
        }
        const resetSeconds = Math.max(1, Math.ceil(resetInMs / 1000))
        reply.header('x-ratelimit-limit', max)
        reply.header('x-ratelimit-remaining', count < max ? max - count : 0)
        reply.header('x-ratelimit-reset', resetSeconds)
        if (count <= max) {
          done()
          return
        }
        onExceeded?.(ip, name)
        done(new TooManyRequestsError(max, resetSeconds))
      })
    }
    const existing = route.onRequest
    route.onRequest =
      existing === undefined ? [hook] : Array.isArray(existing) ? [...existing, hook] : [existing, hook]
  })
}
