import type { Redis } from 'ioredis'
import { LRUCache } from 'lru-cache'
import type { Clock } from './clock.js'
import { TooManyRequestsError } from './errors.js'

/**
 * Per-account back-off on failed credentials (passwords, OTPs, TOTP codes), on top of the
 * per-address limits: the key is the account, so rotating X-Forwarded-For does not help an attacker.
 * The first FREE_FAILURES failures cost nothing; each further one locks the key for twice as long as
 * the last, capped at MAX_LOCK_MS, and the count is forgotten WINDOW_MS after the last failure, so a
 * real user is never locked out for longer than the cap.
 */
export const BACKOFF_POLICY = {
  FREE_FAILURES: 5,
  BASE_LOCK_MS: 1_000,
  MAX_LOCK_MS: 15 * 60_000,
  WINDOW_MS: 15 * 60_000,
} as const

function lockFor(failures: number): number {
  const over = failures - BACKOFF_POLICY.FREE_FAILURES
  if (over <= 0) return 0
  return Math.min(BACKOFF_POLICY.BASE_LOCK_MS * 2 ** (over - 1), BACKOFF_POLICY.MAX_LOCK_MS)
}

export interface Backoff {
  /** Throws 429 while the key is locked. */
  assertAllowed(key: string): Promise<void>
  recordFailure(key: string): Promise<void>
  recordSuccess(key: string): Promise<void>
}

interface State {
  failures: number
  lockedUntil: number
}

function memoryStore(clock: Clock) {
  const states = new LRUCache<string, State>({
    max: 100_000,
    ttl: BACKOFF_POLICY.WINDOW_MS,
    ttlAutopurge: false,
  })
  return {
    async lockedUntil(key: string) {
      return states.get(key)?.lockedUntil ?? 0
    },
    async fail(key: string) {
      const s = states.get(key) ?? { failures: 0, lockedUntil: 0 }
      s.failures++
      s.lockedUntil = clock.now() + lockFor(s.failures)
      states.set(key, s)
    },
    async reset(key: string) {
      states.delete(key)
    },
  }
}

// KEYS[1] = counter, KEYS[2] = lock; ARGV = now, window, free, base, max
const FAIL = `
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local over = n - tonumber(ARGV[3])
if over > 0 then
  local ms = math.min(tonumber(ARGV[4]) * 2 ^ (over - 1), tonumber(ARGV[5]))
  redis.call('SET', KEYS[2], tonumber(ARGV[1]) + ms, 'PX', math.floor(ms))
end
return n
`

function redisStore(redis: Redis, prefix: string, clock: Clock) {
  const k = (key: string) => [`${prefix}bo:n:${key}`, `${prefix}bo:l:${key}`] as const
  return {
    async lockedUntil(key: string) {
      return Number((await redis.get(k(key)[1])) ?? 0)
    },
    async fail(key: string) {
      const [n, l] = k(key)
      const p = BACKOFF_POLICY
      await redis.eval(
        FAIL,
        2,
        n,
        l,
        clock.now(),
        p.WINDOW_MS,
        p.FREE_FAILURES,
        p.BASE_LOCK_MS,
        p.MAX_LOCK_MS,
      )
    },
    async reset(key: string) {
      await redis.del(...k(key))
    },
  }
}

/**
 * Shared through Redis when configured so every instance sees the same count; while Redis is
 * unreachable each instance falls back to its own in-process count rather than dropping the check.
 */
export function createBackoff(clock: Clock, redis?: Redis, prefix = ''): Backoff {
  const local = memoryStore(clock)
  const shared = redis ? redisStore(redis, prefix, clock) : undefined
  async function use<T>(op: (s: typeof local) => Promise<T>): Promise<T> {
    if (shared) {
      try {
        return await op(shared)
      } catch {
        // Redis unreachable: the in-process count answers.
      }
    }
    return op(local)
  }
  return {
    async assertAllowed(key) {
      const until = await use((s) => s.lockedUntil(key))
      const wait = until - clock.now()
      if (wait > 0) {
        throw new TooManyRequestsError(
          BACKOFF_POLICY.FREE_FAILURES,
          Math.ceil(wait / 1000),
          'Too many failed attempts; try again later',
        )
      }
    },
    recordFailure: (key) => use((s) => s.fail(key)),
    recordSuccess: (key) => use((s) => s.reset(key)),
  }
}
