import { buildApp } from './app.js'
import { buildMetricsServer } from './metrics/metrics.routes.js'
import type { Config } from './platform/config.js'

/** Runs the service until SIGTERM or SIGINT, then drains in-flight requests and exits 0. */
export async function serve(config: Config): Promise<void> {
  const app = await buildApp(config)
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
  process.on('SIGTERM', () => shutdown('SIGTERM'))
  process.on('SIGINT', () => shutdown('SIGINT'))
  await app.listen({ host: config.HOST, port: config.PORT })
  await metricsServer?.listen({ host: config.HOST, port: config.METRICS_PORT })
}
