import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance } from 'fastify'
import type { Redis } from 'ioredis'
import { TooManyRequestsError } from './errors.js'

export interface RateLimitOptions {
  /** Shared counters for several instances; in-process counters when absent. */
  redis?: Redis
  prefix: string
  onExceeded?: (ip: string, route: string) => void
}

/**
 * Per-address, per-route, per-minute limits. A route opts in with `config: perMinute(n)`. The address
 * is `request.ip`, which Fastify takes from X-Forwarded-For as TRUST_PROXY allows. When Redis is
 * unreachable requests go through (skipOnError); the Redis client logs the outage once.
 */
export async function registerRateLimit(app: FastifyInstance, opts: RateLimitOptions): Promise<void> {
  await app.register(rateLimit, {
    global: false,
    ...(opts.redis ? { redis: opts.redis } : {}),
    nameSpace: `${opts.prefix}rl:`,
    skipOnError: true,
    // In-process counters are bounded: the least recently seen addresses are dropped first.
    cache: 100_000,
    keyGenerator: (request) => request.ip,
    onExceeded: (request) => opts.onExceeded?.(request.ip, request.routeOptions.url ?? request.url),
    errorResponseBuilder: (_request, ctx) =>
      new TooManyRequestsError(ctx.max, Math.max(1, Math.ceil(ctx.ttl / 1000))),
  })
}

/** Route config for a limit of `max` requests per address per minute. */
export function perMinute(max: number) {
  return { rateLimit: { max, timeWindow: 60_000 } }
}
