// Traces end to end: the instance started with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a real OTLP/HTTP
// receiver (node:http decoding the JSON export), as a collector would receive them.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { login, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import {
  newTicketType,
  newTransfer,
  type PartnerKeys,
  registerReceiver,
  seedPartner,
} from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { type SmtpSink, startAppWithMail } from '../../test/helpers/smtp-sink.js'
import { waitFor } from '../../test/helpers/until.js'
import { startTracing } from './tracing.js'

interface Span {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  attributes: Record<string, unknown>
}

const SERVER = 2
const CLIENT = 3

/** The spans of every OTLP/HTTP JSON export POSTed to it. */
async function startCollector() {
  const spans: Span[] = []
  const server = http.createServer((req, res) => {
    let body = ''
    req.on('data', (d) => {
      body += d
    })
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const doc = JSON.parse(body) as {
          resourceSpans: {
            scopeSpans: {
              spans: (Omit<Span, 'attributes'> & {
                attributes?: { key: string; value: Record<string, unknown> }[]
              })[]
            }[]
          }[]
        }
        for (const rs of doc.resourceSpans)
          for (const ss of rs.scopeSpans)
            for (const s of ss.spans)
              spans.push({
                ...s,
                attributes: Object.fromEntries(
                  (s.attributes ?? []).map((a) => [a.key, Object.values(a.value)[0]]),
                ),
              })
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

const collector = await startCollector()
// The SDK reads the standard variables itself, from the process's environment.
Object.assign(process.env, {
  OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_SERVICE_NAME: 'wristband-test',
  OTEL_BSP_SCHEDULE_DELAY: '50',
})
after(() => collector.close())

const isDatabaseSpan = (s: Span) =>
  s.name === 'sqlite.query' ||
  s.attributes['db.system'] === 'postgresql' ||
  s.attributes['db.system.name'] === 'postgresql'

/** The server span of the request to `route` made after `since` spans had arrived, once its trace is complete. */
async function traceOf(route: string, since: number, expect: (trace: Span[]) => boolean) {
  let seen: Span[][] = []
  try {
    return await waitFor(
      async () => {
        await (await startTracing()).flush()
        seen = []
        for (const root of collector.spans.slice(since)) {
          if (root.kind !== SERVER || root.attributes['http.route'] !== route) continue
          const trace = collector.spans.filter((s) => s.traceId === root.traceId)
          // Parents end after their children: a trace is complete once every span's parent has arrived.
          if (expect(trace) && isTree(root, trace)) return { root, trace }
          seen.push(trace)
        }
        return undefined
      },
      30_000,
      `the trace of ${route}`,
    )
  } catch (err) {
    const shown = seen.map((tr) =>
      tr.map((s) => `${s.kind} ${s.name} ${s.attributes['url.full'] ?? ''}`).join(', '),
    )
    throw new Error(`${(err as Error).message}; traces of the route: ${shown.join(' | ') || 'none'}`)
  }
}

function isTree(root: Span, trace: Span[]): boolean {
  const ids = new Set(trace.map((s) => s.spanId))
  return trace.every((s) => s === root || (s.parentSpanId !== undefined && ids.has(s.parentSpanId)))
}

/** Every span of the trace hangs from the request's span: one trace, no orphan. */
function assertOneTree(root: Span, trace: Span[]) {
  const ids = new Set(trace.map((s) => s.spanId))
  for (const s of trace)
    if (s !== root)
      assert.ok(s.parentSpanId && ids.has(s.parentSpanId), `${s.name} hangs from no span of the trace`)
}

eachBackend(httpBackends, 'traces to an OTLP/HTTP collector', (backend) => {
  let t: TestApp
  let sink: SmtpSink
  let closeApp = async () => {}
  let receiver: Receiver
  let keys: PartnerKeys
  before(async () => {
    ;({
      t,
      sink,
      close: closeApp,
    } = await startAppWithMail(backend, {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      WEBHOOK_ALLOW_PRIVATE: 'true',
      JOBS_POLL_MS: '20',
      TRANSFER_EMAIL_DELAY_SECONDS: '0',
    }))
    receiver = await startReceiver()
    keys = await seedPartner(t)
    await registerReceiver(t, keys.write, receiver.url)
  })
  after(async () => {
    await closeApp()
    await receiver.close()
  })

  test('a login continues the caller trace: request, password check, token signing and database spans', async () => {
    const since = collector.spans.length
    const traceId = randomBytes(16).toString('hex')
    const parent = randomBytes(8).toString('hex')
    const res = await t.request({
      method: 'POST',
      url: '/auth/login',
      headers: { traceparent: `00-${traceId}-${parent}-01` },
      payload: { email: 'root@example.com', password: 's3cret-pass' },
    })
    assert.equal(res.statusCode, 200, res.body)
    const { root, trace } = await traceOf(
      '/auth/login',
      since,
      (tr) =>
        ['password.verify', 'token.sign'].every((n) => tr.some((s) => s.name === n)) &&
        tr.some(isDatabaseSpan),
    )
    assert.equal(root.traceId, traceId)
    assert.equal(root.parentSpanId, parent)
    assertOneTree(root, trace)
  })

  test('a partner transfer: one trace with its database spans, its mail job, and the mail carries it', async () => {
    const ticketUid = await newTicketType(t, keys.write)
    const since = collector.spans.length
    const email = `traced-${backend.name.replace(/\W/g, '')}@example.com`
    await newTransfer(t, keys.write, ticketUid, { email })
    const mail = await sink.waitFor(email, /./, 30_000)
    const { root, trace } = await traceOf(
      '/companies/transfer',
      since,
      (tr) => tr.filter(isDatabaseSpan).length >= 2 && tr.some((s) => s.name.startsWith('job ')),
    )
    assertOneTree(root, trace)
    const traceparent = String(mail.headers.get('traceparent') ?? '')
    assert.equal(traceparent.split('-')[1], root.traceId, traceparent)
  })

  test('a ticket use: one trace with the revocation check, the use, the database and the webhook sent, which carries it', async () => {
    const ticketUid = await newTicketType(t, keys.write)
    const transfer = await newTransfer(t, keys.write, ticketUid)
    const scanner = (await login(t, 'op@example.com', 'operator')).access_token
    const since = collector.spans.length
    const before = receiver.log.length
    const res = await t.request({
      method: 'POST',
      url: `/tickets/${transfer.transfer_uid}/use`,
      token: scanner,
    })
    assert.equal(res.statusCode, 200, res.body)
    const hook = await waitFor(() =>
      receiver.log.slice(before).find((r) => r.body.includes(transfer.transfer_uid)),
    )
    const route = (
      await waitFor(async () => {
        await (await startTracing()).flush()
        return collector.spans
          .slice(since)
          .find((s) => s.kind === SERVER && String(s.attributes['http.route']).endsWith('/use'))
      })
    ).attributes['http.route'] as string
    const { root, trace } = await traceOf(
      route,
      since,
      (tr) =>
        ['token.revocation_check', 'ticket.use', 'webhook.deliver'].every((n) =>
          tr.some((s) => s.name === n),
        ) &&
        tr.some(isDatabaseSpan) &&
        tr.some(
          (s) =>
            s.kind === CLIENT && String(s.attributes['url.full'] ?? '').startsWith(receiver.url.slice(0, 20)),
        ),
    )
    assertOneTree(root, trace)
    // The partner's receiver got the trace: its traceparent names the use's trace and the sending span.
    const traceparent = String(hook.headers.traceparent ?? '')
    const [, hookTrace, hookParent] = traceparent.split('-')
    assert.equal(hookTrace, root.traceId, traceparent)
    const sender = trace.find((s) => s.spanId === hookParent)
    assert.equal(sender?.kind, CLIENT)
  })

  test('log lines written inside a traced request carry its trace_id', async () => {
    const since = t.logs.length
    const traceId = randomBytes(16).toString('hex')
    await t.request({
      method: 'POST',
      url: '/auth/login',
      headers: { traceparent: `00-${traceId}-0102030405060708-01` },
      payload: { email: 'nobody@example.com', password: 'wrong-password' },
    })
    const lines = t.logs.slice(since).map((l) => JSON.parse(l) as Record<string, unknown>)
    assert.ok(
      lines.some((l) => l.trace_id === traceId && typeof l.span_id === 'string'),
      JSON.stringify(lines),
    )
  })
})
