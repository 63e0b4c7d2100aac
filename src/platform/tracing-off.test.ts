// Tracing is off by default and then costs no module: an instance started without OTEL_* variables never
// resolves the OpenTelemetry SDK, an exporter or an instrumentation (nor @fastify/otel). Its own file, so that the hook below sees every
// module the app loads: nothing is imported statically but node's own.
import assert from 'node:assert/strict'
import { registerHooks } from 'node:module'
import { test } from 'node:test'

const resolved: string[] = []
registerHooks({
  resolve(specifier, context, nextResolve) {
    const r = nextResolve(specifier, context)
    resolved.push(r.url)
    return r
  },
})

test('an instance without OTEL_* variables loads no OpenTelemetry module', async () => {
  for (const name of Object.keys(process.env)) if (name.startsWith('OTEL_')) delete process.env[name]
  const { startApp, login } = await import('../../test/helpers/app.js')
  const { httpBackends } = await import('../../test/helpers/backends.js')
  const t = await startApp(httpBackends[0]!)
  try {
    assert.equal(t.config.tracing, false)
    await t.seed((await import('../../test/helpers/app.js')).STANDARD_SEED)
    await login(t, 'root@example.com')
    assert.equal((await t.request({ method: 'GET', url: '/health' })).statusCode, 200)
  } finally {
    await t.close()
  }
  // The hook saw the app being loaded (Fastify, Kysely, the database driver)…
  for (const dep of ['/fastify/', '/kysely/', '/better-sqlite3/'])
    assert.ok(
      resolved.some((u) => u.includes(`node_modules${dep}`)),
      `${dep} was not seen loading: the check proves nothing`,
    )
  // …and no OpenTelemetry module among them but its API, which prom-client loads for its exemplars
  // whatever tracing does (a few kilobytes that register nothing): no SDK, exporter or instrumentation.
  assert.deepEqual(
    resolved.filter(
      (u) =>
        (u.includes('/@opentelemetry/') && !u.includes('/@opentelemetry/api/')) ||
        u.includes('/@fastify/otel/'),
    ),
    [],
  )
})

test('the standard variables turn tracing on; OTEL_SDK_DISABLED and the none exporter keep it off', async () => {
  const { tracingRequested } = await import('./tracing.js')
  assert.equal(tracingRequested({}), false)
  assert.equal(tracingRequested({ OTEL_SERVICE_NAME: 'x' }), false)
  assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }), true)
  assert.equal(
    tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }),
    true,
  )
  assert.equal(tracingRequested({ OTEL_TRACES_EXPORTER: 'otlp' }), true)
  assert.equal(
    tracingRequested({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }),
    false,
  )
  assert.equal(
    tracingRequested({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }),
    false,
  )
})
