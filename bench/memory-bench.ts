/**
 * `npm run bench:memory`: does the service's memory level off under a flood of distinct client
 * addresses and many revocations? (Issue 9, point 5: in-process stores are bounded and expire entries.)
 *
 * Starts the real service (`wristband serve`, memory/sqlite, pinned to CPU 0) and drives it over HTTP:
 *   phase 1: POST /tokens/verify of one valid access token from BENCH_MEMORY_ADDRESSES (1,000,000)
 *            distinct X-Forwarded-For addresses, each used once (wrk, a Lua script counting addresses
 *            up from where the previous step stopped), in steps of BENCH_MEMORY_STEP seconds;
 *   phase 2: BENCH_MEMORY_REVOCATIONS (100,000) refresh-token rotations through POST /auth/refresh,
 *            each revoking the token it rotates (one in-process blocklist entry each), from several
 *            sessions at once, every token used exactly once, every request from a fresh address.
 * Resident memory (VmRSS of the service process) and the V8 heap (the service's own
 * nodejs_heap_size_used_bytes, scraped from its METRICS_PORT) are sampled every second and after every
 * step. Writes bench/results/memory.md and memory.json. A script, not a test: it measures, it asserts
 * nothing.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import autocannon from 'autocannon'
import { abort, freePort, hasCommand, killAll, pinSelf, rssBytes, track } from './lib/processes.js'
import { f0, machineLine, mb, table, writeResults } from './lib/report.js'
import { STORES, startService } from './lib/service.js'

function envNumber(name: string, def: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return def
  const n = Number(raw)
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`)
  return n
}

const run = promisify(execFile)

const ADDRESSES = envNumber('BENCH_MEMORY_ADDRESSES', 1_000_000)
const REVOCATIONS = envNumber('BENCH_MEMORY_REVOCATIONS', 100_000)
const STEP_SECONDS = Math.max(1, Math.round(envNumber('BENCH_MEMORY_STEP', 2)))
const REVOCATION_CHUNK = Math.max(1000, Math.round(REVOCATIONS / 20))
const SESSIONS = 32
const TIME_LIMIT = envNumber('BENCH_TIME_LIMIT', 420)

// Every request from a new address: 10.a.b.c counted up from `offset`; ADDRESSES ≤ 16,777,215.
const WRK_SCRIPT = `
local body = ""
local offset = 0
local i = 0

function init(args)
  body = args[1]
  offset = tonumber(args[2])
end

function request()
  i = i + 1
  local k = offset + i
  local ip = string.format("10.%d.%d.%d", math.floor(k / 65536) % 256, math.floor(k / 256) % 256, k % 256)
  return wrk.format("POST", "/tokens/verify", {
    ["Content-Type"] = "application/json",
    ["X-Forwarded-For"] = ip,
  }, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('BENCH {"requests":%d,"duration_us":%d,"errors":%d,"status":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status))
end
`

interface Sample {
  t: number
  phase: string
  addresses: number
  revocations: number
  rss: number
  heapUsed: number
  heapTotal: number
}

async function main(): Promise<void> {
  const limit = setTimeout(() => {
    console.error(`memory bench: time limit of ${TIME_LIMIT} s reached; stopping`)
    void abort(1)
  }, TIME_LIMIT * 1000)
  limit.unref()
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => void abort(130))
  process.on('exit', killAll)
  if (!hasCommand('wrk')) throw new Error('memory bench: needs wrk (apt-get install wrk)')
  if (ADDRESSES > 16_777_215) throw new Error('BENCH_MEMORY_ADDRESSES: at most 16,777,215 (10.0.0.0/8)')
  pinSelf(1)
  const header = machineLine()
  console.log(header)

  const metricsPort = await freePort()
  const store = STORES.find((s) => s.name === 'memory/sqlite')!
  const service = await startService(store, { backends: {}, env: { METRICS_PORT: String(metricsPort) } })
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-bench-memory-'))
  const samples: Sample[] = []
  const steps: Sample[] = []
  let phase = 'idle'
  let addresses = 0
  let revocations = 0
  const started = performance.now()

  const heap = async (): Promise<{ used: number; total: number }> => {
    try {
      const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
      const text = await res.text()
      const read = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN)
      return { used: read('nodejs_heap_size_used_bytes'), total: read('nodejs_heap_size_total_bytes') }
    } catch {
      return { used: Number.NaN, total: Number.NaN }
    }
  }
  const sample = async (): Promise<Sample> => {
    const h = await heap()
    return {
      t: (performance.now() - started) / 1000,
      phase,
      addresses,
      revocations,
      rss: rssBytes(service.pid),
      heapUsed: h.used,
      heapTotal: h.total,
    }
  }
  const sampler = setInterval(() => {
    void sample().then((s) => samples.push(s))
  }, 1000)
  const step = async () => {
    const s = await sample()
    steps.push(s)
    console.log(
      `${s.t.toFixed(0).padStart(4)} s  ${s.phase.padEnd(12)} addresses ${f0(s.addresses).padStart(9)}  revocations ${f0(s.revocations).padStart(7)}  RSS ${mb(s.rss).padStart(6)} MB  heap used ${mb(s.heapUsed).padStart(6)} MB`,
    )
  }

  let failures = 0
  try {
    const { access_token } = await service.login()
    const body = JSON.stringify({ token: access_token })
    const probe = await service.post('/tokens/verify', { token: access_token })
    if (probe.status !== 200 || !probe.body.startsWith('{"valid":true'))
      throw new Error(`verify probe: ${probe.status} ${probe.body}`)
    await sleep(2000)
    await step()

    // Phase 1: a million distinct addresses.
    phase = 'addresses'
    const script = path.join(workDir, 'distinct.lua')
    fs.writeFileSync(script, WRK_SCRIPT)
    let offset = 0
    const verifyStart = performance.now()
    while (addresses < ADDRESSES) {
      const connections = 64
      const { stdout } = await runWrk([
        '-c',
        '1',
        'wrk',
        '-t1',
        `-c${connections}`,
        `-d${STEP_SECONDS}s`,
        '--timeout',
        '10s',
        '-s',
        script,
        `${service.origin}/tokens/verify`,
        '--',
        body,
        String(offset),
      ])
      const line = stdout.split('\n').find((l) => l.startsWith('BENCH '))
      if (!line) throw new Error(`wrk printed no result:\n${stdout}`)
      const r = JSON.parse(line.slice(6)) as { requests: number; errors: number; status: number }
      failures += r.errors + r.status
      addresses += r.requests
      // Requests still in flight when wrk stopped may have used the next addresses: skip past them.
      offset += r.requests + connections
      await step()
    }
    const verifySeconds = (performance.now() - verifyStart) / 1000

    // Phase 2: revocations through refresh-token rotation.
    phase = 'revocations'
    const pool: string[] = []
    while (pool.length < SESSIONS + 8) pool.push((await service.login()).refresh_token)
    let n = 0
    const revokeStart = performance.now()
    while (revocations < REVOCATIONS) {
      const amount = Math.min(REVOCATION_CHUNK, REVOCATIONS - revocations)
      const r = await autocannon({
        url: service.origin,
        connections: SESSIONS,
        amount,
        timeout: 10,
        requests: [
          {
            method: 'POST',
            path: '/auth/refresh',
            setupRequest: (req) => {
              const token = pool.shift()
              if (!token) throw new Error('refresh pool ran dry: refreshes are failing')
              n++
              return {
                ...req,
                headers: {
                  'content-type': 'application/json',
                  // A fresh address per rotation: /auth/refresh allows 30 a minute per address.
                  'x-forwarded-for': `11.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`,
                },
                body: JSON.stringify({ refresh_token: token }),
              }
            },
            onResponse: (status, text) => {
              if (status === 200) {
                revocations++
                pool.push((JSON.parse(text) as { refresh_token: string }).refresh_token)
              }
            },
          },
        ],
      })
      failures += r.non2xx + r.errors + r.timeouts
      // A rotation whose answer was lost (error) took its session with it: start another.
      while (pool.length < SESSIONS + 8) pool.push((await service.login()).refresh_token)
      await step()
    }
    const revokeSeconds = (performance.now() - revokeStart) / 1000

    phase = 'idle'
    await sleep(3000)
    await step()
    clearInterval(sampler)

    const md = report(header, steps, failures, verifySeconds, revokeSeconds)
    console.log(`\n${md}`)
    writeResults('memory', md, {
      machine: header,
      addresses,
      revocations,
      failures,
      verify_seconds: verifySeconds,
      revocation_seconds: revokeSeconds,
      steps,
      samples,
    })
  } finally {
    clearInterval(sampler)
    await service.dispose()
    fs.rmSync(workDir, { recursive: true, force: true })
  }
}

function runWrk(args: string[]): Promise<{ stdout: string }> {
  const running = run('taskset', args, { maxBuffer: 1 << 20 })
  track(running.child)
  return running
}

/** Growth over the first and the second half of a phase, by its own progress measure. */
function halves(rows: Sample[], progress: (s: Sample) => number, start: Sample) {
  const end = rows[rows.length - 1]!
  const total = progress(end) - progress(start)
  const mid = rows.find((s) => progress(s) - progress(start) >= total / 2) ?? end
  return {
    start,
    mid,
    end,
    first: mid.rss - start.rss,
    second: end.rss - mid.rss,
    heapFirst: mid.heapUsed - start.heapUsed,
    heapSecond: end.heapUsed - mid.heapUsed,
  }
}

function report(
  header: string,
  steps: Sample[],
  failures: number,
  verifySeconds: number,
  revokeSeconds: number,
): string {
  const idle = steps[0]!
  const addr = steps.filter((s) => s.phase === 'addresses')
  const rev = steps.filter((s) => s.phase === 'revocations')
  const lastAddr = addr[addr.length - 1]!
  const last = steps[steps.length - 1]!
  const a = halves(addr, (s) => s.addresses, idle)
  const r = halves(rev, (s) => s.revocations, lastAddr)
  const signed = (bytes: number) => `${bytes >= 0 ? '+' : ''}${mb(bytes)} MB`
  const levels = (first: number, second: number) =>
    second <= Math.max(first * 0.25, 2 * 2 ** 20)
      ? 'levels off'
      : second <= first * 0.6
        ? 'slows down'
        : 'keeps growing'
  const perRevocation = (r.end.heapUsed - r.start.heapUsed) / Math.max(1, last.revocations)
  const lines = [
    '# Memory under a million addresses and a hundred thousand revocations',
    '',
    header,
    '',
    '`wristband serve` on memory/sqlite, pinned to CPU 0, log level info (to /dev/null). Phase 1:',
    `POST /tokens/verify of one valid access token from ${f0(lastAddr.addresses)} distinct X-Forwarded-For`,
    `addresses, each used once (wrk, 64 connections, ${f0(lastAddr.addresses / verifySeconds)} req/s). Phase 2:`,
    `${f0(last.revocations)} refresh-token rotations (POST /auth/refresh, ${SESSIONS} sessions at once, a fresh`,
    `address each, ${f0(last.revocations / revokeSeconds)} req/s); each revokes the token it rotates, which stays`,
    'on the in-process blocklist until that token expires (REFRESH_TOKEN_EXPIRE_DAYS, 30 by default).',
    'RSS is VmRSS of the service process; heap is its own nodejs_heap_size_used_bytes.',
    failures ? `\n**${f0(failures)} requests failed (non-2xx or errors).**` : '',
    '',
    ...table(
      ['s', 'phase', 'addresses seen', 'revocations', 'RSS MB', 'heap used MB', 'heap total MB'],
      steps.map((s) => [
        s.t.toFixed(0),
        s.phase,
        f0(s.addresses),
        f0(s.revocations),
        mb(s.rss),
        mb(s.heapUsed),
        mb(s.heapTotal),
      ]),
      [true, false, true, true, true, true, true],
    ),
    '',
    `- Addresses: RSS ${signed(a.first)} over the first ${f0(a.mid.addresses)} addresses, ${signed(a.second)} over the rest (heap ${signed(a.heapFirst)}, ${signed(a.heapSecond)}): **${levels(a.first, a.second)}**.`,
    `- Revocations: RSS ${signed(r.first)} over the first ${f0(r.mid.revocations)} revocations, ${signed(r.second)} over the rest (heap ${signed(r.heapFirst)}, ${signed(r.heapSecond)}): **${levels(r.first, r.second)}**; heap ${f0(perRevocation)} bytes per revocation.`,
    `- Verdict (whole run, by time): RSS ${mb(idle.rss)} MB idle, ${mb(lastAddr.rss)} MB after the addresses, ${mb(last.rss)} MB at the end; ${verdict(steps)}.`,
  ]
  return `${lines.filter((l, i) => l !== '' || lines[i - 1] !== '').join('\n')}\n`
}

/** First half of the loaded run against the second half, by time. */
function verdict(steps: Sample[]): string {
  const loaded = steps.filter((s) => s.phase !== 'idle' || s === steps[0])
  const start = loaded[0]!
  const end = loaded[loaded.length - 1]!
  const midT = (start.t + end.t) / 2
  const mid = loaded.find((s) => s.t >= midT) ?? end
  const first = mid.rss - start.rss
  const second = end.rss - mid.rss
  const word =
    second <= Math.max(first * 0.25, 2 * 2 ** 20)
      ? 'memory levels off (the second half grew far less than the first)'
      : 'memory did NOT level off (the second half grew by more than a quarter of the first)'
  return `RSS grew ${mb(first)} MB in the first half of the loaded run (to ${mid.t.toFixed(0)} s) and ${mb(second)} MB in the second: ${word}`
}

await main().then(
  () => process.exit(0),
  async (err) => {
    console.error(err)
    await abort(1)
  },
)
