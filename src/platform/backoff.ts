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

/** The back-off's 429: an attempt on a locked account (a lockout, which a rate limit is not). */
export class LockedOut extends TooManyRequestsError {}

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
  /**
   * Counts an attempt on every one of `keys` (the budgets of each account the credential may belong
   * to), in one step; throws 429 (without counting any) while one of them is locked.
   */
  countAttempt(keys: readonly string[]): Promise<void>
  /** The credential was right: the count and any lock are forgotten. */
  recordSuccess(key: string): Promise<void>
}

interface State {
  attempts: number
  lockedUntil: number
}

/** Both stores answer "admitted" (0) or the time the latest lock of the keys ends. */
interface Store {
  attempt(keys: readonly string[], now: number): Promise<number>
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
    async attempt(keys, now) {
      const locked = Math.max(0, ...keys.map((key) => states.get(key)?.lockedUntil ?? 0))
      if (locked > now) return locked
      for (const key of keys) {
        const attempts = (states.get(key)?.attempts ?? 0) + 1
        states.set(key, { attempts, lockedUntil: now + lockFor(attempts) })
      }
      return 0
    },
    async reset(key) {
      states.delete(key)
    },
  }
}

// KEYS = hashes {n, until}; ARGV = now, window, free, base, max. No key is counted while one is
// locked; the locks are compared with the caller's clock, and each hash lives WINDOW_MS after the
// last attempt.
const ATTEMPT = `
local now = tonumber(ARGV[1])
local locked = 0
for _, key in ipairs(KEYS) do
  locked = math.max(locked, tonumber(redis.call('HGET', key, 'until') or '0'))
end
if locked > now then return locked end
for _, key in ipairs(KEYS) do
  local n = redis.call('HINCRBY', key, 'n', 1)
  local over = n - tonumber(ARGV[3])
  if over > 0 then
    local ms = math.min(tonumber(ARGV[4]) * 2 ^ (over - 1), tonumber(ARGV[5]))
    redis.call('HSET', key, 'until', math.floor(now + ms))
  end
  redis.call('PEXPIRE', key, ARGV[2])
end
return 0
`

function redisStore(redis: Redis, prefix: string): Store {
  const k = (key: string) => `${prefix}bo:${key}`
  const p = BACKOFF_POLICY
  return {
    async attempt(keys, now) {
      const r = await redis.eval(
        ATTEMPT,
        keys.length,
        ...keys.map(k),
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
    async countAttempt(keys) {
      const now = clock.now()
      const until = await use((s) => s.attempt(keys, now))
      if (until > now) {
        throw new LockedOut(
          BACKOFF_POLICY.FREE_FAILURES,
          Math.ceil((until - now) / 1000),
          'Too many failed attempts; try again later',
        )
      }
    },
    recordSuccess: (key) => use((s) => s.reset(key)),
  }
}
