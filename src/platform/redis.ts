import type { FastifyBaseLogger } from 'fastify'
import { Redis } from 'ioredis'

/**
 * A Redis client for state that is shared by instances. Commands fail fast while Redis is down
 * (no offline queue) so callers can fall back; an outage is logged once when it starts and once when
 * it ends, never per request.
 */
export function createRedis(url: string, log: FastifyBaseLogger): Redis {
  const redis = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: 1000,
    retryStrategy: (times) => Math.min(100 * times, 2000),
    // Commands issued in the same tick (rate-limit count, revocation look-up, across concurrent
    // requests) go out in one write.
    enableAutoPipelining: true,
  })
  let healthy = true
  redis.on('error', (err) => {
    if (!healthy) return
    healthy = false
    log.warn(
      { err: { message: err.message } },
      'redis unreachable: rate limits fail open, revocations read from the database',
    )
  })
  redis.on('ready', () => {
    if (healthy) return
    healthy = true
    log.info('redis reachable again')
  })
  return redis
}

/** Connects, or logs and carries on in degraded mode (the client keeps reconnecting). */
export async function connectRedis(redis: Redis): Promise<void> {
  try {
    await redis.connect()
  } catch {
    // The 'error' listener has logged the outage; retryStrategy keeps trying.
  }
}
