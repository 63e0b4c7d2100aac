import type { Redis } from 'ioredis'
import type { DatabaseHandle } from '../platform/db/database.js'
import type { StorageHealth } from './storage-health.js'

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

/** What readiness is checked on: the database, DATA_DIR and, when configured, Redis. */
export interface ReadinessDeps {
  database: DatabaseHandle
  storage: StorageHealth
  redis?: Redis
}

export interface Readiness {
  /** Whether the instance can serve: the database answers and takes writes, DATA_DIR takes files. */
  ready: boolean
  /** Ready, but a dependency the service can do without (Redis) is down. */
  degraded: boolean
  checks: { database: DatabaseState; data_dir: DependencyState; redis: DependencyState }
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

async function checkDatabase(database: DatabaseHandle, storage: StorageHealth): Promise<DatabaseState> {
  try {
    const [pending, readOnly] = await withTimeout(
      (async () => {
        await database.ping()
        return Promise.all([database.pendingMigrations(), database.readOnly()])
      })(),
    )
    if (pending.length > 0)
      return {
        status: 'down',
        dialect: database.dialect,
        reason: 'migrations_pending',
        pending_migrations: pending,
      }
    if (readOnly) {
      storage.report({ code: database.dialect === 'sqlite' ? 'SQLITE_READONLY' : '25006' }, database.name)
      return { status: 'down', dialect: database.dialect, reason: 'read_only' }
    }
    // A write that failed a moment ago (a full disk shows itself no other way on PostgreSQL).
    const failed = storage.recent()
    if (failed && failed.path === database.name)
      return { status: 'down', dialect: database.dialect, reason: failed.problem }
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

async function checkDataDir(storage: StorageHealth): Promise<DependencyState> {
  const problem = await storage.probeDataDir()
  if (problem) return { status: 'down', reason: problem }
  const failed = storage.recent()
  if (failed && failed.path === storage.dataDir) return { status: 'down', reason: failed.problem }
  return { status: 'up' }
}

/**
 * Whether this instance can serve: the database answers, takes writes and carries every migration
 * this code expects (a restored older backup would not), and DATA_DIR takes files. Redis down is
 * "degraded", not unready: the service works without it (rate limits fail open, revocations are read
 * from the database), and a balancer that took every instance out over it would take the service down.
 */
export async function checkReadiness(deps: ReadinessDeps): Promise<Readiness> {
  const [database, data_dir, redis] = await Promise.all([
    checkDatabase(deps.database, deps.storage),
    checkDataDir(deps.storage),
    checkRedis(deps.redis),
  ])
  const ready = database.status === 'up' && data_dir.status === 'up'
  if (ready) deps.storage.healthy()
  return { ready, degraded: ready && redis.status === 'down', checks: { database, data_dir, redis } }
}
