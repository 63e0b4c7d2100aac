// Retries on 429/503, against a scripted HTTP server on a real socket (a busy service is hard to make
// on demand). The waits are recorded by an injected sleep instead of being slept.
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { backoffMs, createPartnerClient, isIdempotent, retryAfterMs } from './client.js'
import { RateLimitedError, unwrap } from './errors.js'

interface Seen {
  method: string
  path: string
  idempotencyKey: string | undefined
  body: string
}

describe('partner client retries', () => {
  const seen: Seen[] = []
  let script: { status: number; headers?: Record<string, string> }[] = []
  let server: http.Server
  let baseUrl: string
  before(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        seen.push({
          method: req.method ?? '',
          path: req.url ?? '',
          idempotencyKey: req.headers['idempotency-key'] as string | undefined,
          body: Buffer.concat(chunks).toString(),
        })
        const next = script.shift() ?? { status: 200 }
        const body =
          next.status === 429
            ? { error: 'rate_limit_exceeded', detail: 'Rate limit exceeded', limit: 120, retry_after: 7 }
            : next.status >= 400
              ? { detail: 'Service temporarily unavailable' }
              : { tickets: [] }
        res.writeHead(next.status, { 'content-type': 'application/json', ...next.headers })
        res.end(JSON.stringify(body))
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  after(() => new Promise<void>((resolve) => server.close(() => resolve())))

  function client(waits: number[], retries = 3) {
    return createPartnerClient({
      baseUrl,
      apiKey: 'key',
      retry: { retries, baseDelayMs: 100, maxDelayMs: 10_000 },
      sleep: async (ms) => {
        waits.push(ms)
      },
    })
  }

  test('a GET answered 429 then 503 is sent again, waiting what Retry-After says', async () => {
    seen.length = 0
    script = [
      { status: 429, headers: { 'retry-after': '7' } },
      { status: 503, headers: { 'retry-after': '2' } },
    ]
    const waits: number[] = []
    const data = await unwrap(client(waits).GET('/companies/tickets'))
    assert.deepEqual(data, { tickets: [] })
    assert.equal(seen.length, 3)
    assert.deepEqual(waits, [7000, 2000])
  })

  test('an idempotent POST is retried with the same Idempotency-Key and body', async () => {
    seen.length = 0
    script = [{ status: 503 }, { status: 503 }]
    const waits: number[] = []
    const body = {
      event_uid: 'e',
      email: 'a@example.com',
      ticket_uid: 'f'.repeat(32),
      company_ticket_id: 'c-1',
    }
    await client(waits).POST('/companies/transfer', { body })
    assert.equal(seen.length, 3)
    assert.equal(new Set(seen.map((s) => s.idempotencyKey)).size, 1, 'one key for every attempt')
    assert.ok(seen[0]!.idempotencyKey)
    for (const s of seen) assert.deepEqual(JSON.parse(s.body), body)
    // Without Retry-After: exponential back-off (with jitter on the upper half of each step).
    assert.equal(waits.length, 2)
    assert.ok(waits[0]! >= 50 && waits[0]! <= 100, `${waits[0]}`)
    assert.ok(waits[1]! >= 100 && waits[1]! <= 200, `${waits[1]}`)
  })

  test('a POST the service does not deduplicate is sent once, and the 503 comes back', async () => {
    seen.length = 0
    script = [{ status: 503 }]
    const waits: number[] = []
    const res = await client(waits).POST('/companies/webhook/deliveries/{id}/retry', {
      params: { path: { id: 1 } },
    })
    assert.equal(res.response.status, 503)
    assert.equal(seen.length, 1)
    assert.deepEqual(waits, [])
  })

  test("Retry-After: 60 (the service's window) is waited in full; one above maxRetryAfterMs is not retried", async () => {
    seen.length = 0
    script = [{ status: 429, headers: { 'retry-after': '60' } }]
    const waits: number[] = []
    await unwrap(client(waits).GET('/companies/tickets'))
    assert.deepEqual(waits, [60_000])
    assert.equal(seen.length, 2)

    seen.length = 0
    script = [{ status: 429, headers: { 'retry-after': '60' } }]
    const impatient = createPartnerClient({
      baseUrl,
      apiKey: 'key',
      retry: { maxRetryAfterMs: 10_000 },
      sleep: async (ms) => {
        waits.push(ms)
      },
    })
    await assert.rejects(unwrap(impatient.GET('/companies/tickets')), (err: unknown) => {
      assert.ok(err instanceof RateLimitedError)
      assert.equal(err.retryAfterSeconds, 60)
      return true
    })
    assert.equal(seen.length, 1, 'not retried before the window ends')
  })

  test('after the last retry the 429 is a RateLimitedError with its Retry-After', async () => {
    seen.length = 0
    script = [
      { status: 429, headers: { 'retry-after': '3' } },
      { status: 429, headers: { 'retry-after': '3' } },
    ]
    const waits: number[] = []
    await assert.rejects(unwrap(client(waits, 1).GET('/companies/tickets')), (err: unknown) => {
      assert.ok(err instanceof RateLimitedError)
      assert.equal(err.code, 'rate_limit_exceeded')
      assert.equal(err.retryAfterSeconds, 3)
      return true
    })
    assert.equal(seen.length, 2)
  })

  test('Retry-After as a date, a cap on every wait, and which calls are idempotent', () => {
    const now = Date.parse('2026-07-01T00:00:00Z')
    assert.equal(retryAfterMs('Wed, 01 Jul 2026 00:00:05 GMT', now), 5000)
    assert.equal(retryAfterMs('soon', now), undefined)
    // Retry-After is waited in full (the client gives up on one above maxRetryAfterMs instead).
    assert.equal(backoffMs(1, 60_000, { baseDelayMs: 100, maxDelayMs: 30_000 }), 60_000)
    assert.equal(backoffMs(9, undefined, { baseDelayMs: 100, maxDelayMs: 30_000 }) <= 30_000, true)
    const base = new URL('https://w.example.com/api/')
    assert.ok(isIdempotent('GET', new URL('https://w.example.com/api/companies/tickets'), base))
    assert.ok(isIdempotent('POST', new URL('https://w.example.com/api/companies/ticket'), base))
    assert.ok(
      !isIdempotent('POST', new URL('https://w.example.com/api/companies/webhook/deliveries/1/retry'), base),
    )
    assert.ok(!isIdempotent('PATCH', new URL('https://w.example.com/api/x'), base))
  })
})
