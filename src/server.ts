import cluster, { type Worker } from 'node:cluster'
import type { Server } from 'node:http'
import net from 'node:net'
import type { FastifyInstance } from 'fastify'
import { aggregateWorkerMetrics, shareWorkerMetrics } from './metrics/cluster-metrics.js'
import { availableCpus } from './ops/cpu-quota.js'
import type { Config } from './platform/config.js'
import { openDatabase } from './platform/db/database.js'
import { LEVEL_RANK } from './platform/logging.js'
import { databaseUnavailable, listenFailure } from './platform/startup.js'
import { releaseVersion } from './platform/version.js'

export class ServeError extends Error {}

/**
 * How many processes to run. Several workers only make sense when they share state through Redis:
 * with in-process state a revocation or a rate-limit count in one worker would be unknown to the
 * others, so without Redis (REDIS_URL or REDIS_SENTINELS) the default is one worker and asking for more is refused. The default
 * with Redis is one per CPU this process may use (its container's quota, not the host's cores).
 */
export function workerCount(config: Config, requested: number | undefined): number {
  if (requested !== undefined) {
    if (!Number.isInteger(requested) || requested < 1)
      throw new ServeError('--workers must be a whole number ≥ 1')
    if (requested > 1 && !config.redis) {
      throw new ServeError(
        '--workers > 1 needs REDIS_URL (or REDIS_SENTINELS): workers share revocations and rate limits through Redis',
      )
    }
    return requested
  }
  return config.redis ? availableCpus() : 1
}

/**
 * Runs the service until SIGTERM or SIGINT, then drains (see `drainAndExit`) and exits 0. Migrations
 * are applied once, before any worker starts, on a connection without the service's statement limit.
 */
export async function serve(config: Config, requestedWorkers?: number): Promise<void> {
  const workers = workerCount(config, requestedWorkers)
  if (cluster.isWorker) return serveWorker(config)
  // Opening checks DATABASE_SCHEMA at once: a database that is down fails here, in one line.
  const handle = await openDatabase(config.databaseUrl, { schema: config.DATABASE_SCHEMA }).catch((err) => {
    throw databaseUnavailable(config.databaseUrl, err)
  })
  try {
    const { applied } = await handle.migrate().catch((err) => {
      throw databaseUnavailable(config.databaseUrl, err)
    })
    if (applied.length > 0)
      logLine(config, 'info', `applied migrations: ${applied.join(', ')}`, { migrations: applied })
  } finally {
    await handle.close()
  }
  // One line an operator reads first: which release, how many workers, on what.
  const database = handle.dialect === 'sqlite' ? `SQLite ${handle.name}` : `PostgreSQL ${handle.name}`
  logLine(
    config,
    'info',
    `wristband ${releaseVersion()} starting: ${workers} worker${workers === 1 ? '' : 's'}, ${database}, Redis ${config.redis ? ('sentinels' in config.redis ? `through Sentinel (master ${config.redis.master})` : 'configured') : 'not configured'}, Node ${process.version}`,
    {
      version: releaseVersion(),
      workers,
      database: handle.dialect,
      redis: config.redis !== undefined,
      node: process.version,
    },
  )
  if (workers === 1) return serveOne(config)
  return supervise(config, workers)
}

/** A log line of the primary process (before any app exists), in the service's JSON form. */
function logLine(
  config: Pick<Config, 'LOG_LEVEL'>,
  level: 'info' | 'error',
  msg: string,
  fields: Record<string, unknown> = {},
): void {
  if ((LEVEL_RANK[level] ?? 0) < (LEVEL_RANK[config.LOG_LEVEL] ?? Number.POSITIVE_INFINITY)) return
  const line = JSON.stringify({ level, time: new Date().toISOString(), pid: process.pid, msg, ...fields })
  if (level === 'error') console.error(line)
  else console.log(line)
}

/** What a worker tells the primary when it cannot start, so the primary can say it in one line. */
interface StartFailed {
  wristband: 'start-failed'
  message: string
}

async function serveWorker(config: Config): Promise<void> {
  try {
    await serveOne(config)
  } catch (err) {
    const message: StartFailed = { wristband: 'start-failed', message: (err as Error).message }
    await new Promise((resolve) => process.send?.(message, undefined, {}, resolve) ?? resolve(null))
    process.exit(1)
  }
}

async function serveOne(config: Config): Promise<void> {
  // Loaded here, not at the top: the primary of a fleet forks its workers without ever building an
  // app, and loading one (its every feature) cost it more than the rest of what it does before the fork.
  const [{ buildApp }, { buildMetricsServer }] = await Promise.all([
    import('./app.js'),
    import('./metrics/metrics.routes.js'),
  ])
  const app = await buildApp(config)
  if (cluster.isWorker) shareWorkerMetrics(app.metrics)
  const metricsServer =
    config.METRICS_PORT === undefined
      ? undefined
      : await buildMetricsServer({ metrics: app.metrics, token: config.METRICS_TOKEN, logger: app.log })
  let draining = false
  const shutdown = (signal: string) => {
    if (draining) return
    draining = true
    // Ctrl-C at a terminal wants the process gone, not a load balancer's grace period.
    const drainSeconds = signal === 'SIGINT' ? 0 : config.SHUTDOWN_DRAIN_SECONDS
    drainAndExit(app, drainSeconds, signal, () => metricsServer?.close())
  }
  process.on('SIGTERM', () => shutdown('SIGTERM'))
  process.on('SIGINT', () => shutdown('SIGINT'))
  await app.listen({ host: config.HOST, port: config.PORT })
  try {
    await metricsServer?.listen({ host: config.HOST, port: config.METRICS_PORT })
  } catch (err) {
    // Named as the setting it comes from: "the port is in use (PORT)" would send one looking elsewhere.
    throw listenFailure(err, 'METRICS_PORT') ?? err
  }
}

/** Time allowed, after the drain period, for requests in flight and job attempts to finish. */
const FINISH_MS = 10_000

/**
 * The graceful stop: /ready answers 503 at once while every route keeps answering for `drainSeconds`
 * (a load balancer polling /ready sees it and stops sending); then the listener closes, requests in
 * flight and the current attempt of each background job finish, the database and Redis are closed,
 * and the process exits 0. Past drain + 10 s it exits 1 regardless. SIGINT skips the drain period.
 */
function drainAndExit(
  app: FastifyInstance,
  drainSeconds: number,
  signal: string,
  closeMore: () => Promise<unknown> | undefined,
): void {
  app.beginDrain()
  app.log.info({ signal, drain_seconds: drainSeconds }, 'shutting down: /ready answers 503 from now on')
  const force = setTimeout(
    () => {
      app.log.error(`shutdown took longer than ${drainSeconds} s + ${FINISH_MS / 1000} s; exiting`)
      process.exit(1)
    },
    drainSeconds * 1000 + FINISH_MS,
  )
  force.unref()
  setTimeout(() => {
    app.log.info('shutting down: draining in-flight requests')
    app.endKeepAlive()
    stopAccepting(app.server)
      .then(() => Promise.all([app.close(), closeMore()]))
      .then(
        () => {
          app.log.info({ signal }, 'stopped')
          process.exit(0)
        },
        (err) => {
          app.log.error({ err }, 'error during shutdown')
          process.exit(1)
        },
      )
  }, drainSeconds * 1000)
}

/** How long the listener stays closed before idle connections are closed, when requests keep coming. */
const ACCEPTED_GRACE_MAX_MS = 2000
/** Quiet time after which no request is on its way on a connection accepted before the listener closed. */
const ACCEPTED_QUIET_MS = 250

/**
 * Closes the listener but not yet the connections it accepted: a client that connected a moment
 * before (its request still on the wire) would otherwise be reset by the idle-connection sweep of
 * `server.close()`. Requests on those connections are answered (with `connection: close`); once none
 * has arrived for a moment, app.close() closes whatever is left idle and waits for the rest.
 */
function stopAccepting(server: Server): Promise<void> {
  // net.Server's close: the listening socket only. http.Server's would also close idle connections.
  net.Server.prototype.close.call(server)
  return new Promise((resolve) => {
    let quiet: NodeJS.Timeout
    const done = () => {
      clearTimeout(quiet)
      clearTimeout(bound)
      server.off('request', onRequest)
      resolve()
    }
    const onRequest = () => {
      clearTimeout(quiet)
      quiet = setTimeout(done, ACCEPTED_QUIET_MS)
    }
    server.on('request', onRequest)
    quiet = setTimeout(done, ACCEPTED_QUIET_MS)
    const bound = setTimeout(done, ACCEPTED_GRACE_MAX_MS)
  })
}

/** A worker that dies before serving, or this soon after it started, counts as a quick death. */
const QUICK_DEATH_MS = 10_000
/** Quick deaths in a row after which the primary stops replacing workers and exits 1. */
const GIVE_UP_AFTER = 3

/**
 * The primary forks workers that share the listening port (node:cluster). A worker that dies is
 * replaced, after a growing pause when it died at once (port taken, database refused); after
 * GIVE_UP_AFTER such deaths in a row the primary stops every worker and exits 1 with one line. On
 * SIGTERM every worker drains (see drainAndExit) and the primary exits 0 once all have exited 0.
 */
function supervise(config: Config, workers: number): void {
  const startedAt = new Map<number, number>()
  const serving = new Set<number>()
  let quickDeaths = 0
  let lastFailure: string | undefined
  let stopping = false
  aggregateWorkerMetrics()
  let exitCode = 0
  const fork = () => {
    const worker = cluster.fork()
    startedAt.set(worker.id, Date.now())
    worker.on('message', (m: Partial<StartFailed>) => {
      if (m?.wristband === 'start-failed') lastFailure = m.message
    })
  }
  const alive = () => Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined)
  const stopAll = (code: number, signal: NodeJS.Signals) => {
    exitCode = Math.max(exitCode, code)
    if (stopping) return
    stopping = true
    if (alive().length === 0) process.exit(exitCode)
    for (const w of alive()) w.process.kill(signal)
    const force = setTimeout(
      () => {
        for (const w of alive()) w.process.kill('SIGKILL')
        process.exit(1)
      },
      config.SHUTDOWN_DRAIN_SECONDS * 1000 + FINISH_MS + 2000,
    )
    force.unref()
  }
  cluster.on('listening', (worker) => serving.add(worker.id))
  cluster.on('exit', (worker, code, signal) => {
    const quick = !serving.has(worker.id) || Date.now() - (startedAt.get(worker.id) ?? 0) < QUICK_DEATH_MS
    startedAt.delete(worker.id)
    serving.delete(worker.id)
    if (stopping) {
      if (code !== 0) exitCode = 1
      if (alive().length === 0) {
        // A failed start has said why in its one line already.
        if (exitCode === 0) logLine(config, 'info', 'stopped')
        process.exit(exitCode)
      }
      return
    }
    quickDeaths = quick ? quickDeaths + 1 : 0
    if (quickDeaths >= GIVE_UP_AFTER) {
      console.error(
        `wristband serve: ${GIVE_UP_AFTER} workers in a row died at start (last: ${lastFailure ?? `exit code ${code}, signal ${signal}`}); giving up`,
      )
      stopAll(1, 'SIGTERM')
      return
    }
    const pauseMs = quick ? Math.min(250 * 2 ** (quickDeaths - 1), 5000) : 0
    console.error(
      JSON.stringify({
        level: 'error',
        time: new Date().toISOString(),
        msg: 'worker exited; starting another',
        pid: worker.process.pid,
        code,
        signal,
        pause_ms: pauseMs,
        ...(quick && lastFailure ? { reason: lastFailure } : {}),
      }),
    )
    setTimeout(() => {
      if (!stopping) fork()
    }, pauseMs)
  })
  for (let i = 0; i < workers; i++) fork()
  process.on('SIGTERM', () => stopAll(0, 'SIGTERM'))
  process.on('SIGINT', () => stopAll(0, 'SIGINT'))
}
