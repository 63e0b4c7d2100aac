import type { Redis } from 'ioredis'
import type { DatabaseHandle } from '../platform/db/database.js'

export type DependencyState =
  | { status: 'up' }
  | { status: 'down'; reason: string }
  | { status: 'not_configured' }

export interface DatabaseState {
  status: 'up' | 'down'
  dialect: string
  reason?: string
  pending_migrations?: string[]
}

/** What readiness is checked on: the database and, when configured, Redis. */
export interface ReadinessDeps {
  database: DatabaseHandle
  redis?: Redis
}

export interface Readiness {
  ready: boolean
  checks: { database: DatabaseState; redis: DependencyState }
}

// A probe that waits longer than the orchestrator's own timeout tells it nothing.
const CHECK_TIMEOUT_MS = 2000

function withTimeout<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timed out')), CHECK_TIMEOUT_MS)
  })
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer))
}

/** The client-facing reason: the kind of failure, never a host name or a driver message. */
function reasonOf(err: unknown): string {
  const e = err as { code?: string; message?: string }
  if (e?.message === 'timed out') return 'timeout'
  return e?.code ?? 'unreachable'
}

async function checkDatabase(database: DatabaseHandle): Promise<DatabaseState> {
  try {
    const pending = await withTimeout(
      (async () => {
        await database.ping()
        return database.pendingMigrations()
      })(),
    )
    if (pending.length > 0)
      return {
        status: 'down',
        dialect: database.dialect,
        reason: 'migrations_pending',
        pending_migrations: pending,
      }
    return { status: 'up', dialect: database.dialect, pending_migrations: [] }
  } catch (err) {
    return { status: 'down', dialect: database.dialect, reason: reasonOf(err) }
  }
}

async function checkRedis(redis: Redis | undefined): Promise<DependencyState> {
  if (!redis) return { status: 'not_configured' }
  // The client queues nothing while disconnected, so a ping fails at once during an outage.
  try {
    await withTimeout(redis.ping())
    return { status: 'up' }
  } catch (err) {
    return { status: 'down', reason: redis.status === 'ready' ? reasonOf(err) : 'unreachable' }
  }
}

/**
 * Whether this instance can serve: the database answers and carries every migration this code
 * expects (a restored older backup would not), and Redis answers when it is configured.
 */
export async function checkReadiness(deps: ReadinessDeps): Promise<Readiness> {
  const [database, redis] = await Promise.all([checkDatabase(deps.database), checkRedis(deps.redis)])
  return { ready: database.status === 'up' && redis.status !== 'down', checks: { database, redis } }
}
