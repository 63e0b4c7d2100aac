/**
 * Throughput of a small Fastify backend guarded by @wristband/verifier with its cache warm, beside the
 * same backend and route with no check at all: the cost a backend pays per request for the caller
 * contract once the token's answer is cached.
 *
 * The wristband service runs in this process (SQLite), the backend in a child process and autocannon
 * in another, all on loopback. With taskset and two CPUs the backend has CPU 1 to itself, the load
 * generator and the (idle) service share CPU 0.
 *
 *   node --import tsx bench/verifier-bench.ts
 *
 * Settings: VERIFIER_BENCH_SECONDS (per measured run, default 3), VERIFIER_BENCH_ROUNDS (runs per case,
 * interleaved; the median is reported, default 3), VERIFIER_BENCH_CONNECTIONS (default 10).
 */
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import fs from 'node:fs'
import type { IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import Fastify from 'fastify'
import { createFastifyGuard } from '../packages/verifier/src/fastify.js'
import { createVerifier } from '../packages/verifier/src/index.js'
import { login, STANDARD_SEED, startApp } from '../test/helpers/app.js'
import { backends } from '../test/helpers/backends.js'

const run = promisify(execFile)
const BACKEND_ROLE = 'VERIFIER_BENCH_AUTH_URL'
const AUTOCANNON = fileURLToPath(import.meta.resolve('autocannon/autocannon.js'))

function setting(name: string, def: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return def
  const n = Number(raw)
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, got "${raw}"`)
  return n
}

export interface BenchRow {
  name: string
  rps: number
  p50Ms: number
  p99Ms: number
  non2xx: number
  errors: number
  /** POST /tokens/verify requests that reached the service during the measured runs. */
  serviceCalls: number
  /** Backend CPU time per request over all measured runs: steadier than req/s on a shared machine. */
  cpuUsPerRequest: number | null
}

function ticksPerSecond(): number {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
  } catch {
    return 100
  }
}

/** CPU seconds (user + system) a process has used, from /proc; null where there is none. */
function cpuSeconds(pid: number | undefined): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name may hold spaces; the fields after its closing parenthesis are fixed.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond()
  } catch {
    return null
  }
}

/** The backend process: one route with the guard, the same route without it. */
async function serveBackend(authUrl: string): Promise<void> {
  const guard = createFastifyGuard(createVerifier({ baseUrl: authUrl, timeoutMs: 2000 }))
  const app = Fastify()
  const scan = async (req: { params: unknown }) => ({
    event: (req.params as { eventId: string }).eventId,
    ok: true,
  })
  app.get('/open/events/:eventId/scan', scan)
  app.get(
    '/guarded/events/:eventId/scan',
    { preHandler: guard.requireScopes('ticket:scan', { event: (req) => req.params.eventId }) },
    scan,
  )
  await app.listen({ host: '127.0.0.1', port: 0 })
  process.stdout.write(`PORT ${(app.server.address() as AddressInfo).port}\n`)
}

function canPin(): boolean {
  if (os.availableParallelism() < 2) return false
  try {
    execFileSync('sh', ['-c', 'command -v taskset'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

function pinned(pin: boolean, cpu: number, command: string, args: string[]): [string, string[]] {
  return pin ? ['taskset', ['-c', String(cpu), command, ...args]] : [command, args]
}

async function startBackend(pin: boolean, authUrl: string): Promise<{ child: ChildProcess; url: string }> {
  const script = fileURLToPath(import.meta.url)
  const [cmd, args] = pinned(pin, 1, process.execPath, ['--import', 'tsx', script])
  const child = spawn(cmd, args, {
    env: { ...process.env, [BACKEND_ROLE]: authUrl },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const lines = createInterface({ input: child.stdout! })
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`backend exited early (${code})`)
  })
  exited.catch(() => {}) // it exits at the end of every run too; only the race below cares
  const port = await Promise.race([
    (async () => {
      for await (const line of lines) if (line.startsWith('PORT ')) return Number(line.slice(5))
      throw new Error('backend closed its output without a port')
    })(),
    exited,
  ])
  return { child, url: `http://127.0.0.1:${port}` }
}

interface AutocannonResult {
  requests: { average: number; total: number }
  latency: { p50: number; p99: number }
  non2xx: number
  errors: number
  timeouts: number
}

async function load(pin: boolean, url: string, token: string, seconds: number, connections: number) {
  const [cmd, args] = pinned(pin, 0, process.execPath, [
    AUTOCANNON,
    '--json',
    '-c',
    String(connections),
    '-d',
    String(seconds),
    '-H',
    `authorization=Bearer ${token}`,
    url,
  ])
  const { stdout } = await run(cmd, args, { maxBuffer: 16 * 1024 * 1024, timeout: (seconds + 30) * 1000 })
  return JSON.parse(stdout) as AutocannonResult
}

export async function verifierBench(
  opts: { seconds?: number; rounds?: number; connections?: number } = {},
): Promise<{ rows: BenchRow[]; pinned: boolean }> {
  const seconds = opts.seconds ?? setting('VERIFIER_BENCH_SECONDS', 3)
  const rounds = opts.rounds ?? setting('VERIFIER_BENCH_ROUNDS', 3)
  const connections = opts.connections ?? setting('VERIFIER_BENCH_CONNECTIONS', 10)
  const pin = canPin()
  if (pin) execFileSync('taskset', ['-a', '-p', '-c', '0', String(process.pid)], { stdio: 'ignore' })

  const service = await startApp(backends[0]!, { LOG_LEVEL: 'warn' })
  let child: ChildProcess | undefined
  try {
    await service.seed(STANDARD_SEED)
    let calls = 0
    service.app.server.on('request', (req: IncomingMessage) => {
      if (req.url === '/tokens/verify') calls++
    })
    await service.app.listen({ host: '127.0.0.1', port: 0 })
    const authUrl = `http://127.0.0.1:${(service.app.server.address() as AddressInfo).port}`
    const { access_token } = await login(service, 'op@example.com', 'operator')

    const backend = await startBackend(pin, authUrl)
    child = backend.child
    const cases = [
      { name: 'no check', url: `${backend.url}/open/events/1/scan` },
      { name: 'verifier, cache warm', url: `${backend.url}/guarded/events/1/scan` },
    ]
    for (const c of cases) {
      const res = await fetch(c.url, { headers: { authorization: `Bearer ${access_token}` } })
      if (res.status !== 200) throw new Error(`${c.name}: ${res.status} ${await res.text()}`)
      await load(pin, c.url, access_token, 1, connections) // JIT warm-up, not counted
    }

    const runs = new Map<string, { result: AutocannonResult; calls: number; cpu: number | null }[]>(
      cases.map((c) => [c.name, []]),
    )
    for (let r = 0; r < rounds; r++) {
      for (const c of cases) {
        const before = calls
        const cpuBefore = cpuSeconds(child.pid)
        const result = await load(pin, c.url, access_token, seconds, connections)
        const cpuAfter = cpuSeconds(child.pid)
        const cpu = cpuBefore === null || cpuAfter === null ? null : cpuAfter - cpuBefore
        runs.get(c.name)!.push({ result, calls: calls - before, cpu })
      }
    }
    const rows = cases.map((c) => {
      const all = runs.get(c.name)!
      const median = [...all].sort((a, b) => a.result.requests.average - b.result.requests.average)[
        Math.floor(all.length / 2)
      ]!.result
      return {
        name: c.name,
        rps: median.requests.average,
        p50Ms: median.latency.p50,
        p99Ms: median.latency.p99,
        non2xx: all.reduce((n, x) => n + x.result.non2xx, 0),
        errors: all.reduce((n, x) => n + x.result.errors + x.result.timeouts, 0),
        serviceCalls: all.reduce((n, x) => n + x.calls, 0),
        cpuUsPerRequest: all.some((x) => x.cpu === null)
          ? null
          : (all.reduce((n, x) => n + x.cpu!, 0) * 1e6) /
            all.reduce((n, x) => n + x.result.requests.total, 0),
      }
    })
    return { rows, pinned: pin }
  } finally {
    child?.kill('SIGTERM')
    await service.close()
  }
}

export function formatTable(rows: BenchRow[]): string {
  const head = ['backend', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'non-2xx', 'errors', 'verify calls']
  const base = rows[0]?.rps ?? 0
  const body = rows.map((r) => [
    r.name,
    `${Math.round(r.rps)}${r === rows[0] || !base ? '' : ` (${Math.round((r.rps / base) * 100)}%)`}`,
    String(r.p50Ms),
    String(r.p99Ms),
    r.cpuUsPerRequest === null ? 'n/a' : r.cpuUsPerRequest.toFixed(1),
    String(r.non2xx),
    String(r.errors),
    String(r.serviceCalls),
  ])
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)))
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n')
}

const authUrl = process.env[BACKEND_ROLE]
if (authUrl) {
  await serveBackend(authUrl)
} else if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { rows, pinned: pin } = await verifierBench()
  console.log(
    `Fastify backend, GET /events/1/scan, operator access token, loopback` +
      (pin ? ' (backend on CPU 1, autocannon and wristband on CPU 0)' : ' (unpinned)'),
  )
  console.log(formatTable(rows))
}
