/**
 * OpenTelemetry tracing, started only when the standard variables ask for it (`tracingRequested`):
 * this module is imported lazily by `startTracing` in `tracing.ts`, so an instance without them loads no
 * `@opentelemetry` module at all (src/platform/tracing.test.ts checks it).
 *
 * The SDK is configured by the standard variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME,
 * OTEL_TRACES_SAMPLER, OTEL_EXPORTER_OTLP_PROTOCOL…); the instrumentations: `@fastify/otel` (a span per
 * request, its hooks and handler; the incoming `traceparent` continued), PostgreSQL (`pg`), Redis
 * (`ioredis`) and outgoing HTTP (`undici`: webhooks, SMS, identity providers; `traceparent` sent).
 */
import { createRequire } from 'node:module'
import { FastifyOtelInstrumentation } from '@fastify/otel'
import { trace } from '@opentelemetry/api'
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis'
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg'
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici'
import { NodeSDK } from '@opentelemetry/sdk-node'

export interface Telemetry {
  /** Sends the spans ended so far (tests; the server's shutdown). */
  flush(): Promise<void>
  shutdown(): Promise<void>
}

export function startSdk(): Telemetry {
  const sdk = new NodeSDK({
    serviceName: process.env.OTEL_SERVICE_NAME ?? 'wristband',
    instrumentations: [
      new FastifyOtelInstrumentation({ registerOnInitialization: true }),
      new PgInstrumentation({ requireParentSpan: true }),
      new IORedisInstrumentation({ requireParentSpan: true }),
      new UndiciInstrumentation({ requireParentforSpans: true }),
    ],
    resourceDetectors: [],
  })
  sdk.start()
  // Modules loaded before the SDK started (the entry points import them first) are patched now: the
  // instrumentations hook `require`, and a module's next `require` hands its exports to them. The
  // patches change the modules' classes, which every importer shares.
  const require = createRequire(import.meta.url)
  for (const name of ['pg', 'pg-pool', 'ioredis']) require(name)
  return {
    async flush() {
      const proxy = trace.getTracerProvider() as { getDelegate?: () => { forceFlush?: () => Promise<void> } }
      await proxy.getDelegate?.().forceFlush?.()
    },
    shutdown: () => sdk.shutdown(),
  }
}
