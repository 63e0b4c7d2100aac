import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { trace } from '@opentelemetry/api'
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici'
import { NodeSDK } from '@opentelemetry/sdk-node'
import { createVerifier, VerifierError } from './verifier.js'

/**
 * The verifier asks the service with the runtime's fetch, so a backend that runs OpenTelemetry with the
 * standard undici instrumentation (as the service itself does, and auto-instrumentations-node) sends its
 * trace along with every check: the service continues it (docs/observability.md).
 */
test('a check made while a span is active carries that trace in traceparent', async () => {
  const seen: (string | undefined)[] = []
  const server = http.createServer((req, res) => {
    seen.push(req.headers.traceparent as string | undefined)
    req.resume()
    req.on('end', () => {
      res.setHeader('content-type', 'application/json')
      res.end('{"valid": false}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const sdk = new NodeSDK({
    instrumentations: [new UndiciInstrumentation()],
    // Spans are recorded (so the context propagates) and dropped: the test reads the request's header.
    spanProcessors: [{ onStart() {}, onEnd() {}, forceFlush: async () => {}, shutdown: async () => {} }],
    resourceDetectors: [],
  })
  sdk.start()
  try {
    const { port } = server.address() as AddressInfo
    const verifier = createVerifier({ baseUrl: `http://127.0.0.1:${port}`, cacheTtlSeconds: 0 })
    const traceId = await trace.getTracer('backend').startActiveSpan('GET /orders', async (span) => {
      await assert.rejects(verifier.verify(`wb_${'a'.repeat(40)}`), VerifierError)
      span.end()
      return span.spanContext().traceId
    })
    assert.equal(seen.length, 1)
    assert.match(seen[0] ?? '(none)', new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`))
  } finally {
    await sdk.shutdown()
    server.close()
  }
})
