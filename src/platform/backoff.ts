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

function lockFor(attempts: number): number {
  const over = attempts - BACKOFF_POLICY.FREE_FAILURES
  if (over <= 0) return 0
  return Math.min(BACKOFF_POLICY.BASE_LOCK_MS * 2 ** (over - 1), BACKOFF_POLICY.MAX_LOCK_MS)
}

/**
 * An attempt is counted BEFORE its credential is checked, in one atomic step with the lock check:
 * guesses sent at the same instant are then held to the same budget as guesses sent one by one
 * (checking the lock, verifying and only then counting the failure let a burst of hundreds through).
 * A failure keeps the count; a success forgets it.
 */
export interface Backoff {
  /** Counts an attempt on `key`; throws 429 (without counting) while the key is locked. */
  countAttempt(key: string): Promise<void>
  /** The credential was right: the count and any lock are forgotten. */
  recordSuccess(key: string): Promise<void>
}

interface State {
  attempts: number
  lockedUntil: number
}

/** Both stores answer "admitted" (0) or the time the key's lock ends. */
interface Store {
  attempt(key: string, now: number): Promise<number>
  reset(key: string): Promise<void>
}

function memoryStore(): Store {
  const states = new LRUCache<string, State>({
    max: 100_000,
    ttl: BACKOFF_POLICY.WINDOW_MS,
    ttlAutopurge: false,
  })
  return {
    // Synchronous from the read to the write, so concurrent requests of one process cannot interleave.
    async attempt(key, now) {
      const s = states.get(key)
      if (s && s.lockedUntil > now) return s.lockedUntil
      const attempts = (s?.attempts ?? 0) + 1
      states.set(key, { attempts, lockedUntil: now + lockFor(attempts) })
      return 0
    },
    async reset(key) {
      states.delete(key)
    },
  }
}

// KEYS[1] = hash {n, until}; ARGV = now, window, free, base, max. The lock is compared with the
// caller's clock, and the whole hash lives WINDOW_MS after the last attempt.
const ATTEMPT = `
local now = tonumber(ARGV[1])
local locked = tonumber(redis.call('HGET', KEYS[1], 'until') or '0')
if locked > now then return locked end
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
local over = n - tonumber(ARGV[3])
if over > 0 then
  local ms = math.min(tonumber(ARGV[4]) * 2 ^ (over - 1), tonumber(ARGV[5]))
  redis.call('HSET', KEYS[1], 'until', math.floor(now + ms))
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 0
`

function redisStore(redis: Redis, prefix: string): Store {
  const k = (key: string) => `${prefix}bo:${key}`
  const p = BACKOFF_POLICY
  return {
    async attempt(key, now) {
      const r = await redis.eval(
        ATTEMPT,
        1,
        k(key),
        now,
        p.WINDOW_MS,
        p.FREE_FAILURES,
        p.BASE_LOCK_MS,
        p.MAX_LOCK_MS,
      )
      return Number(r)
    },
    async reset(key) {
      await redis.del(k(key))
    },
  }
}

/**
 * Shared through Redis when configured so every instance sees the same count; while Redis is
 * unreachable each instance falls back to its own in-process count rather than dropping the check.
 */
export function createBackoff(clock: Clock, redis?: Redis, prefix = ''): Backoff {
  const local = memoryStore()
  const shared = redis ? redisStore(redis, prefix) : undefined
  async function use<T>(op: (s: Store) => Promise<T>): Promise<T> {
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
    async countAttempt(key) {
      const now = clock.now()
      const until = await use((s) => s.attempt(key, now))
      if (until > now) {
        throw new TooManyRequestsError(
          BACKOFF_POLICY.FREE_FAILURES,
          Math.ceil((until - now) / 1000),
          'Too many failed attempts; try again later',
        )
      }
    },
    recordSuccess: (key) => use((s) => s.reset(key)),
  }
}
