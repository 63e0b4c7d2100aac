import cluster from 'node:cluster'
import os from 'node:os'
import { buildApp } from './app.js'
import { aggregateWorkerMetrics, shareWorkerMetrics } from './metrics/cluster-metrics.js'
import { buildMetricsServer } from './metrics/metrics.routes.js'
import type { Config } from './platform/config.js'
import { openDatabase } from './platform/db/database.js'

export class ServeError extends Error {}

/**
 * How many processes to run. Several workers only make sense when they share state through Redis:
 * with in-process state a revocation or a rate-limit count in one worker would be unknown to the
 * others, so without REDIS_URL the default is one worker and asking for more is refused.
 */
export function workerCount(config: Config, requested: number | undefined): number {
  if (requested !== undefined) {
    if (!Number.isInteger(requested) || requested < 1)
      throw new ServeError('--workers must be a whole number ≥ 1')
    if (requested > 1 && !config.REDIS_URL) {
      throw new ServeError(
        '--workers > 1 needs REDIS_URL: workers share revocations and rate limits through Redis',
      )
    }
    return requested
  }
  return config.REDIS_URL ? os.availableParallelism() : 1
}

/** Runs the service until SIGTERM or SIGINT, then drains in-flight requests and exits 0. */
export async function serve(config: Config, requestedWorkers?: number): Promise<void> {
  const workers = workerCount(config, requestedWorkers)
  if (workers === 1) return serveOne(config)
  if (cluster.isPrimary) return supervise(config, workers)
  return serveOne(config)
}

async function serveOne(config: Config): Promise<void> {
  const app = await buildApp(config)
  if (cluster.isWorker) shareWorkerMetrics(app.metrics)
  const metricsServer =
    config.METRICS_PORT === undefined
      ? undefined
      : await buildMetricsServer({ metrics: app.metrics, token: config.METRICS_TOKEN, logger: app.log })
  let closing = false
  const shutdown = (signal: string) => {
    if (closing) return
    closing = true
    app.log.info({ signal }, 'shutting down: draining in-flight requests')
    const force = setTimeout(() => {
      app.log.error('drain timed out after 10 s; exiting')
      process.exit(1)
    }, 10_000)
    force.unref()
    Promise.all([app.close(), metricsServer?.close()]).then(
      () => process.exit(0),
      (err) => {
        app.log.error({ err }, 'error during shutdown')
        process.exit(1)
      },
    )
  }
  // A keep-alive connection whose request is in flight at shutdown would otherwise stay open (idle)
  // after its answer until the keep-alive timeout, holding the drain past the force-exit timer.
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close')
  })
  process.on('SIGTERM', () => shutdown('SIGTERM'))
  process.on('SIGINT', () => shutdown('SIGINT'))
  await app.listen({ host: config.HOST, port: config.PORT })
  await metricsServer?.listen({ host: config.HOST, port: config.METRICS_PORT })
}

/**
 * The primary applies migrations once, then forks workers that share the listening port (node:cluster).
 * A worker that dies unexpectedly is replaced; on SIGTERM every worker drains and the primary exits 0.
 */
async function supervise(config: Config, workers: number): Promise<void> {
  const handle = await openDatabase(config.databaseUrl, { schema: config.DATABASE_SCHEMA })
  await handle.migrate()
  await handle.close()
  let stopping = false
  aggregateWorkerMetrics()
  for (let i = 0; i < workers; i++) cluster.fork()
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0)
      return
    }
    console.error(
      JSON.stringify({
        level: 50,
        msg: 'worker exited; starting another',
        pid: worker.process.pid,
        code,
        signal,
      }),
    )
    cluster.fork()
  })
  const stop = () => {
    stopping = true
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM')
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}
