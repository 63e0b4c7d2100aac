/**
 * Partner API benchmark (standalone: `node --import tsx bench/partner-bench.ts`). Everything runs on
 * loopback. A child process serves wristband (fresh SQLite file, or BENCH_DATABASE_URL) and, beside it
 * in the same process, a bare node:http server as the baseline of the same run; this process drives
 * both with autocannon (so the load generator does not share the server's event loop) and runs the
 * webhook receiver.
 *
 * Measures transfers per second and ticket uses per second (each beside the baseline), and the time
 * from sending a ticket use to the receiver reading its notification (p50/p99). Bounded: a few seconds
 * per phase (BENCH_SECONDS, default 5) and BENCH_WEBHOOK_SAMPLES notifications (default 200).
 */
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import readline from 'node:readline'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { createApiKey } from '../src/api-keys/api-keys.store.js'
import { buildApp } from '../src/app.js'
import { systemClock } from '../src/platform/clock.js'
import { loadConfig } from '../src/platform/config.js'
import { openDatabase } from '../src/platform/db/database.js'
import { applySeed } from '../src/seed/seed.js'

interface CannonResult {
  requests: { average: number }
  latency: { p50: number; p99: number }
  '2xx': number
  non2xx: number
  errors: number
}
interface CannonRequest {
  method: string
  path: string
  headers?: Record<string, string>
  body?: string
  setupRequest?: (req: CannonRequest) => CannonRequest
  onResponse?: (status: number, body: string) => void
}
type Cannon = (opts: {
  url: string
  connections: number
  duration?: number
  amount?: number
  requests: CannonRequest[]
}) => Promise<CannonResult>

// autocannon ships no type declarations; the few fields used are typed above.
const autocannon = createRequire(import.meta.url)('autocannon') as Cannon

export interface Throughput {
  rps: number
  p99_ms: number
  ok: number
  failed: number
}

export interface PartnerBenchResult {
  baseline: Throughput
  transfers: Throughput
  ticket_uses: Throughput
  webhook_latency_ms: { samples: number; p50: number; p99: number }
}

/** What the serving child reports once it is ready. */
interface Target {
  baseUrl: string
  bareUrl: string
  apiKey: string
}

const PASSWORD = 'bench-pass-1234'

const summary = (r: CannonResult): Throughput => ({
  rps: Math.round(r.requests.average),
  p99_ms: r.latency.p99,
  ok: r['2xx'],
  failed: r.non2xx + r.errors,
})

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
}

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** The serving side (child process): wristband and the bare baseline, until SIGTERM. */
async function serve(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-bench-'))
  const config = loadConfig({
    DATA_DIR: dir,
    DATABASE_URL: process.env.BENCH_DATABASE_URL ?? `sqlite:${path.join(dir, 'bench.db')}`,
    ...(process.env.BENCH_DATABASE_SCHEMA ? { DATABASE_SCHEMA: process.env.BENCH_DATABASE_SCHEMA } : {}),
    JWT_SECRET: 'bench-secret-that-is-at-least-32-bytes-long',
    LOG_LEVEL: 'silent',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    // BENCH_SMTP_URL: the grouped holder e-mails go out at once, to that relay, while transfers arrive.
    ...(process.env.BENCH_SMTP_URL
      ? { SMTP_URL: process.env.BENCH_SMTP_URL, TRANSFER_EMAIL_DELAY_SECONDS: '0' }
      : { TRANSFER_EMAIL_DELAY_SECONDS: '3600' }),
    JOBS_POLL_MS: '50',
  })
  const app = await buildApp(config)
  const baseUrl = await app.listen({ host: '127.0.0.1', port: 0 })
  const bare = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(201, { 'content-type': 'application/json' })
      res.end('{"status":"TRANSFERRED"}')
    })
  })
  const bareUrl = await listen(bare)
  const handle = await openDatabase(config.databaseUrl, { schema: config.DATABASE_SCHEMA })
  await applySeed(handle.db, systemClock, {
    events: [{ id: 1, uid: 'bench-fest', name: 'Bench Fest', timezone: 'Europe/Berlin' }],
    operators: [
      {
        email: 'scanner@example.com',
        password: PASSWORD,
        event_id: 1,
        mode: 0,
        permissions: { '1': ['ticket:scan'] },
      },
    ],
  })
  const { plaintext } = await createApiKey(handle.db, {
    event_id: 1,
    name: 'bench',
    scopes: ['api:read', 'api:write'],
    created_by: null,
    now: Date.now(),
  })
  await handle.close()
  process.on('SIGTERM', async () => {
    bare.close()
    await app.close()
    fs.rmSync(dir, { recursive: true, force: true })
    process.exit(0)
  })
  console.log(JSON.stringify({ baseUrl, bareUrl, apiKey: plaintext } satisfies Target))
}

/** Starts the serving child (with `env` added to this process's) and waits for its address line. */
export async function startTarget(
  env: Record<string, string> = {},
): Promise<{ target: Target; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--serve'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const line = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).once('line', resolve)
    child.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)))
  })
  return {
    target: JSON.parse(line) as Target,
    async stop() {
      child.kill('SIGTERM')
      await exited
    },
  }
}

let address = 0
/** A fresh client address per request, so the per-address rate limits measure nothing here. */
function nextIp(): string {
  address++
  return `10.${(address >> 16) & 255}.${(address >> 8) & 255}.${address & 255}`
}

export async function runPartnerBench(
  opts: { seconds?: number; connections?: number; webhookSamples?: number } = {},
): Promise<PartnerBenchResult> {
  const seconds = opts.seconds ?? Number(process.env.BENCH_SECONDS ?? 5)
  const connections = opts.connections ?? 10
  const samples = opts.webhookSamples ?? Number(process.env.BENCH_WEBHOOK_SAMPLES ?? 200)
  const arrivals = new Map<string, number>()
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const at = performance.now()
      const { transfer_uid } = JSON.parse(Buffer.concat(chunks).toString()) as { transfer_uid: string }
      arrivals.set(transfer_uid, at)
      res.end()
    })
  })
  const receiverUrl = await listen(receiver)
  const { target, stop } = await startTarget()
  const { baseUrl, bareUrl, apiKey } = target
  try {
    const call = async (method: string, url: string, body: unknown, headers: Record<string, string>) => {
      const res = await fetch(`${baseUrl}${url}`, {
        method,
        headers: { 'content-type': 'application/json', 'x-forwarded-for': nextIp(), ...headers },
        body: JSON.stringify(body),
      })
      const json = (await res.json()) as Record<string, unknown>
      if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(json)}`)
      return json
    }
    const login = { email: 'scanner@example.com', password: PASSWORD, role: 'operator' }
    const scanner = String((await call('POST', '/auth/login', login, {})).access_token)
    const ticketUid = String(
      (
        await call(
          'POST',
          '/companies/ticket',
          { event_uid: 'bench-fest', name: 'Day pass', price: 59.9, ticket_date: '2026-07-18T12:00:00.000' },
          { api_key: apiKey },
        )
      ).ticket_uid,
    )

    const baseline = await autocannon({
      url: bareUrl,
      connections,
      duration: seconds,
      requests: [{ method: 'POST', path: '/companies/transfer', body: '{}' }],
    })

    let n = 0
    const transferred: string[] = []
    const transfers = await autocannon({
      url: baseUrl,
      connections,
      duration: seconds,
      requests: [
        {
          method: 'POST',
          path: '/companies/transfer',
          setupRequest: (req) => {
            n++
            return {
              ...req,
              headers: { 'content-type': 'application/json', api_key: apiKey, 'x-forwarded-for': nextIp() },
              body: JSON.stringify({
                event_uid: 'bench-fest',
                // 500 holders: transfers group onto shared links, as in a real sale.
                email: `holder${n % 500}@example.com`,
                ticket_uid: ticketUid,
                company_ticket_id: `bench-${n}`,
                balance: 12.5,
                promo_balance: 0.05,
              }),
            }
          },
          onResponse: (status, body) => {
            if (status === 201) transferred.push((JSON.parse(body) as { transfer_uid: string }).transfer_uid)
          },
        },
      ],
    })

    // Every request is the first use of a different ticket (no 409s in the figure).
    let next = 0
    const uses = await autocannon({
      url: baseUrl,
      connections,
      amount: Math.min(transferred.length, 50_000),
      requests: [
        {
          method: 'POST',
          path: '/tickets/x/use',
          setupRequest: (req) => ({
            ...req,
            path: `/tickets/${transferred[next++]}/use`,
            headers: {
              'content-type': 'application/json',
              authorization: `Bearer ${scanner}`,
              'x-forwarded-for': nextIp(),
            },
            body: '{"access_gate":"North"}',
          }),
        },
      ],
    })

    // Webhook latency: one use at a time, from sending the use to the receiver reading the notification.
    await call('PUT', '/companies/webhook', { url: receiverUrl }, { api_key: apiKey })
    const latencies: number[] = []
    for (let i = 0; i < samples; i++) {
      const t = await call(
        'POST',
        '/companies/transfer',
        {
          event_uid: 'bench-fest',
          email: 'hook@example.com',
          ticket_uid: ticketUid,
          company_ticket_id: `hook-${i}`,
        },
        { api_key: apiKey },
      )
      const uid = String(t.transfer_uid)
      const started = performance.now()
      await call('POST', `/tickets/${uid}/use`, {}, { authorization: `Bearer ${scanner}` })
      const deadline = Date.now() + 10_000
      while (!arrivals.has(uid)) {
        if (Date.now() > deadline) throw new Error(`notification for ${uid} did not arrive within 10 s`)
        await new Promise((r) => setImmediate(r))
      }
      latencies.push(arrivals.get(uid)! - started)
    }
    latencies.sort((a, b) => a - b)
    const round = (x: number) => Math.round(x * 100) / 100
    return {
      baseline: summary(baseline),
      transfers: summary(transfers),
      ticket_uses: summary(uses),
      webhook_latency_ms: {
        samples: latencies.length,
        p50: round(percentile(latencies, 50)),
        p99: round(percentile(latencies, 99)),
      },
    }
  } finally {
    await stop()
    receiver.closeAllConnections()
    receiver.close()
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv.includes('--serve')) await serve()
  else {
    const r = await runPartnerBench()
    const row = (name: string, x: Throughput) =>
      `${name.padEnd(28)} ${String(x.rps).padStart(8)} req/s   p99 ${String(x.p99_ms).padStart(5)} ms   ok ${x.ok}  failed ${x.failed}`
    console.log(row('node:http baseline', r.baseline))
    console.log(row('POST /companies/transfer', r.transfers))
    console.log(row('POST /tickets/{uid}/use', r.ticket_uses))
    const w = r.webhook_latency_ms
    console.log(`USED -> receiver (webhook)   p50 ${w.p50} ms   p99 ${w.p99} ms   (${w.samples} samples)`)
    console.log(JSON.stringify(r))
  }
}
