import type { FastifyBaseLogger } from 'fastify'
import { Redis, type RedisOptions } from 'ioredis'
import type { RedisTarget } from './config.js'

/**
 * Under Sentinel the client asks the sentinels for the master at every (re)connect. A master that
 * hangs rather than dies (a frozen machine, a partition that drops packets) keeps its connections
 * open, so the client would stay on it, every command timing out, long after the sentinels promoted a
 * replica: the failover detector listens for the sentinels' `+switch-master` and reconnects at once.
 * A sentinel that hangs would likewise hold the question forever (ioredis sets no time limit on it):
 * after a second the next sentinel is asked.
 */
function sentinelOptions(target: Extract<RedisTarget, { sentinels: unknown }>): RedisOptions {
  return {
    sentinels: target.sentinels,
    name: target.master,
    ...(target.password !== undefined ? { password: target.password } : {}),
    ...(target.sentinelPassword !== undefined ? { sentinelPassword: target.sentinelPassword } : {}),
    failoverDetector: true,
    sentinelCommandTimeout: 1000,
  }
}

// ioredis's constructor overloads, of which the service uses two (TypeScript resolves no overload for a
// `super` call on the class as declared).
const RedisClient = Redis as unknown as new (...args: [RedisOptions] | [string, RedisOptions]) => Redis

/**
 * ioredis gives a client up for good ('end') when its connection is closed while it is still
 * connecting: under Sentinel, when the failover detector (or a failed role check) closes it while it
 * asks the sentinels for the master, which a failover makes likely. An instance would then run without
 * Redis until restarted. A client of the service ends only when the service closes it (`disconnect()`);
 * otherwise it connects again. Its copies (`duplicate()`, the revocation feed's subscriber) too.
 */
class ServiceRedis extends RedisClient {
  /** Set by `disconnect()`: the service closes the client. */
  #closing = false

  constructor(...args: [RedisOptions] | [string, RedisOptions]) {
    super(...args)
    this.on('end', () => {
      if (this.#closing) return
      setTimeout(() => {
        if (!this.#closing) this.connect().catch(() => {})
      }, 100).unref()
    })
  }

  override disconnect(reconnect = false): void {
    if (!reconnect) this.#closing = true
    super.disconnect(reconnect)
  }

  override duplicate(override?: Partial<RedisOptions>): Redis {
    return new ServiceRedis({ ...this.options, ...override })
  }
}

/**
 * A Redis client for state that is shared by instances, on one address (REDIS_URL) or on the master a
 * set of sentinels names (REDIS_SENTINELS). Commands fail fast while Redis is down (no offline queue) so
 * callers can fall back; an outage is logged once when it starts and once when it ends, never per
 * request. Copies made with `duplicate()` (the revocation feed's subscriber) follow the same master.
 */
export function createRedis(target: RedisTarget, log: FastifyBaseLogger): Redis {
  const options: RedisOptions = {
    ...('sentinels' in target ? sentinelOptions(target) : {}),
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: 1000,
    retryStrategy: (times) => Math.min(100 * times, 2000),
    // Commands issued in the same tick (rate-limit count, revocation look-up, across concurrent
    // requests) go out in one write.
    enableAutoPipelining: true,
  }
  const redis = 'url' in target ? new ServiceRedis(target.url, options) : new ServiceRedis(options)
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
