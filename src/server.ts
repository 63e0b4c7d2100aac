import { buildApp } from './app.js'
import type { Config } from './platform/config.js'

/** Runs the service until SIGTERM or SIGINT, then drains in-flight requests and exits 0. */
export async function serve(config: Config): Promise<void> {
  const app = await buildApp(config)
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
    app.close().then(
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
}
