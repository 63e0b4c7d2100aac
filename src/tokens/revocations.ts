import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { COUNT_LUA, type DeferredLimit } from '../platform/rate-limit.js'

/**
 * The jti blocklist. The database is the record (revocations survive restarts of the service and of
 * Redis); a fast copy answers look-ups: an in-process map, or Redis when several instances share it.
 */
export interface RevocationStore {
  isRevoked(jti: string): boolean | Promise<boolean>
  /**
   * Redis only: counts a request whose route counts itself (see DeferredLimit) and looks `jti` up in
   * the same script call, one round trip for both. `count` is null when Redis failed (the limit then
   * lets the request through, and the database answers the look-up).
   */
  countAndCheck?(
    limit: DeferredLimit,
    jti: string,
  ): Promise<{ count: number | null; resetInMs: number; revoked: boolean }>
  revoke(entries: { jti: string; expiresAt: number }[]): Promise<void>
  start(): Promise<void>
  stop(): void
}

interface Deps {
  db: Db
  clock: Clock
}

async function persist(db: Db, now: number, entries: { jti: string; expiresAt: number }[]): Promise<void> {
  if (entries.length === 0) return
  await db
    .insertInto('revoked_tokens')
    .values(entries.map((e) => ({ jti: e.jti, expires_at: e.expiresAt, revoked_at: now })))
    .onConflict((oc) => oc.column('jti').doNothing())
    .execute()
}

async function loadLive(db: Db, now: number) {
  return db.selectFrom('revoked_tokens').select(['jti', 'expires_at']).where('expires_at', '>', now).execute()
}

/** Single-instance store: every live revocation in a map, expired ones swept each minute. */
export function memoryRevocations({ db, clock }: Deps): RevocationStore {
  const revoked = new Map<string, number>()
  let sweeper: NodeJS.Timeout | undefined
  return {
    isRevoked: (jti) => revoked.has(jti),
    async revoke(entries) {
      await persist(db, clock.now(), entries)
      for (const e of entries) revoked.set(e.jti, e.expiresAt)
    },
    async start() {
      for (const r of await loadLive(db, clock.now())) revoked.set(r.jti, r.expires_at)
      sweeper = setInterval(() => {
        const now = clock.now()
        for (const [jti, exp] of revoked) if (exp <= now) revoked.delete(jti)
      }, 60_000)
      sweeper.unref()
    },
    stop: () => clearInterval(sweeper),
  }
}

// Answers -1 when the copy in Redis is not known to be complete (Redis restarted, reload running).
const LOOKUP_LUA = `
local revoked = -1
if redis.call('EXISTS', KEYS[2]) == 1 then revoked = redis.call('EXISTS', KEYS[3]) end
`
// KEYS: unused, the completeness marker, the jti's key (the same shape as COUNT_AND_CHECK's).
const CHECK = `${LOOKUP_LUA}return revoked`
// KEYS: the rate-limit counter, the marker, the jti's key; ARGV: the window. Returns {count, ttl, revoked}.
const COUNT_AND_CHECK = `${COUNT_LUA}${LOOKUP_LUA}return {n, ttl, revoked}`

interface RedisWithRevocationScripts extends Redis {
  wbRevocationCheck(unused: string, marker: string, key: string): Promise<number>
  wbCountAndCheck(
    counter: string,
    marker: string,
    key: string,
    windowMs: number,
  ): Promise<[number, number, number]>
}

/**
 * Shared store: one Redis round trip per look-up. When Redis is unreachable, or has lost its data
 * and is being reloaded from the database, look-ups go to the database instead.
 */
export function redisRevocations(
  { db, clock }: Deps,
  redis: Redis,
  prefix: string,
  log: FastifyBaseLogger,
): RevocationStore {
  const marker = `${prefix}rv:complete`
  const key = (jti: string) => `${prefix}rv:${jti}`
  // Sent once as a script, then called by its hash (EVALSHA), not as the script's text every time.
  if (!('wbRevocationCheck' in redis)) {
    redis.defineCommand('wbRevocationCheck', { numberOfKeys: 3, lua: CHECK })
    redis.defineCommand('wbCountAndCheck', { numberOfKeys: 3, lua: COUNT_AND_CHECK })
  }
  const scripts = redis as RedisWithRevocationScripts
  const check = (jti: string) => scripts.wbRevocationCheck(marker, marker, key(jti))

  async function fromDb(jti: string): Promise<boolean> {
    const row = await db.selectFrom('revoked_tokens').select('jti').where('jti', '=', jti).executeTakeFirst()
    return row !== undefined
  }

  async function reload() {
    try {
      await redis.del(marker)
      const now = clock.now()
      const rows = await loadLive(db, now)
      for (let i = 0; i < rows.length; i += 1000) {
        const p = redis.pipeline()
        for (const r of rows.slice(i, i + 1000)) p.set(key(r.jti), '1', 'PX', Math.max(1, r.expires_at - now))
        await p.exec()
      }
      await redis.set(marker, '1')
    } catch (err) {
      log.warn({ err: { message: (err as Error).message } }, 'could not reload revocations into redis')
    }
  }
  const onReady = () => void reload()

  return {
    async isRevoked(jti) {
      try {
        const r = await check(jti)
        if (r !== -1) return r === 1
      } catch {
        // Redis unreachable: the database answers.
      }
      return fromDb(jti)
    },
    async countAndCheck(limit, jti) {
      let res: [number, number, number]
      try {
        res = await scripts.wbCountAndCheck(limit.key, marker, key(jti), limit.windowMs)
      } catch {
        return { count: null, resetInMs: 0, revoked: await fromDb(jti) }
      }
      const revoked = res[2] === -1 ? await fromDb(jti) : res[2] === 1
      return { count: res[0], resetInMs: res[1], revoked }
    },
    async revoke(entries) {
      const now = clock.now()
      await persist(db, now, entries)
      try {
        const p = redis.pipeline()
        for (const e of entries) p.set(key(e.jti), '1', 'PX', Math.max(1, e.expiresAt - now))
        await p.exec()
      } catch {
        // Durable in the database; copied into Redis when it is back (reload on 'ready').
      }
    },
    async start() {
      redis.on('ready', onReady)
      if (redis.status === 'ready') await reload()
    },
    stop: () => {
      redis.off('ready', onReady)
    },
  }
}
