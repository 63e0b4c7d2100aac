/**
 * `npm run bench:memory`: does the service's memory level off under a flood of distinct client
 * addresses and many revocations? (in-process stores are bounded and expire entries.)
 *
 * Starts the real service (`wristband serve`, memory/sqlite, pinned to CPU 0) and drives it over HTTP:
 *   phase 1: POST /tokens/verify of one valid access token from BENCH_MEMORY_ADDRESSES (1,000,000)
 *            distinct X-Forwarded-For addresses, each used once (wrk, a Lua script counting addresses
 *            up from where the previous step stopped), in steps of BENCH_MEMORY_STEP seconds;
 *   phase 2: BENCH_MEMORY_REVOCATIONS (100,000) refresh-token rotations through POST /auth/refresh,
 *            each revoking the token it rotates (one in-process blocklist entry each), from several
 *            sessions at once, every token used exactly once, every request from a fresh address.
 * Resident memory (VmRSS of the service process) and its V8 heap are sampled every second; after
 * every step (with no load running) a full garbage collection is forced through the inspector (the
 * service runs with --inspect on loopback; no --expose-gc, no change to its code) and the live heap
 * and RSS are read, so the figures compare what the service holds rather than where its garbage
 * collector happened to be. Writes bench/results/memory.md and memory.json. A script, not a test: it
 * measures, it asserts nothing.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import autocannon from 'autocannon'
import { freePort } from '../test/helpers/processes.js'
import { connectInspector } from './lib/inspector.js'
import { abort, envNumber, guardRun, hasCommand, pinSelf, rssBytes, track } from './lib/processes.js'
import { f0, machineLine, mb, table, writeResults } from './lib/report.js'
import { STORES, startService } from './lib/service.js'

const run = promisify(execFile)

const ADDRESSES = envNumber('BENCH_MEMORY_ADDRESSES', 1_000_000)
const REVOCATIONS = envNumber('BENCH_MEMORY_REVOCATIONS', 100_000)
const STEP_SECONDS = Math.max(1, Math.round(envNumber('BENCH_MEMORY_STEP', 2)))
const REVOCATION_CHUNK = Math.max(1000, Math.round(REVOCATIONS / 20))
const SESSIONS = 32
const TIME_LIMIT = envNumber('BENCH_TIME_LIMIT', 600)

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
  /** VmRSS as it was (garbage included). */
  rss: number
  /** V8 heap used as it was (garbage included). */
  heapUsed: number
  /** After a forced full GC (steps only; NaN in the per-second samples). */
  liveHeap: number
  liveRss: number
  external: number
}

async function main(): Promise<void> {
  guardRun('memory bench', TIME_LIMIT)
  if (!hasCommand('wrk')) throw new Error('memory bench: needs wrk (apt-get install wrk)')
  if (ADDRESSES > 16_777_215) throw new Error('BENCH_MEMORY_ADDRESSES: at most 16,777,215 (10.0.0.0/8)')
  pinSelf(1)
  const header = machineLine()
  console.log(header)

  const inspectPort = await freePort()
  const store = STORES.find((s) => s.name === 'memory/sqlite')!
  const service = await startService(store, {
    backends: {},
    nodeArgs: [`--inspect=127.0.0.1:${inspectPort}`],
  })
  const inspector = await connectInspector(inspectPort)
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-bench-memory-'))
  const samples: Sample[] = []
  const steps: Sample[] = []
  let phase = 'idle'
  let addresses = 0
  let revocations = 0
  const started = performance.now()

  const sample = async (): Promise<Sample> => {
    const rss = rssBytes(service.pid)
    const m = await inspector.memory()
    return {
      t: (performance.now() - started) / 1000,
      phase,
      addresses,
      revocations,
      rss,
      heapUsed: m.heapUsed,
      liveHeap: Number.NaN,
      liveRss: Number.NaN,
      external: m.external,
    }
  }
  const sampler = setInterval(() => {
    void sample().then(
      (s) => samples.push(s),
      () => {},
    )
  }, 1000)
  const step = async () => {
    const s = await sample()
    const live = await inspector.settledMemory()
    s.liveHeap = live.heapUsed
    s.external = live.external
    s.liveRss = rssBytes(service.pid)
    steps.push(s)
    console.log(
      `${s.t.toFixed(0).padStart(4)} s  ${s.phase.padEnd(12)} addresses ${f0(s.addresses).padStart(9)}  revocations ${f0(s.revocations).padStart(7)}  RSS ${mb(s.rss).padStart(6)} MB (${mb(s.liveRss)} after GC)  live heap ${mb(s.liveHeap).padStart(6)} MB`,
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
    inspector.close()
    await service.dispose()
    fs.rmSync(workDir, { recursive: true, force: true })
  }
}

function runWrk(args: string[]): Promise<{ stdout: string }> {
  const running = run('taskset', args, { maxBuffer: 1 << 20 })
  track(running.child)
  return running
}

/** Growth of RSS and of the live heap (both after a full GC) over the first and the second half. */
function halves(rows: Sample[], progress: (s: Sample) => number, start: Sample) {
  const end = rows[rows.length - 1]!
  const total = progress(end) - progress(start)
  const mid = rows.find((s) => progress(s) - progress(start) >= total / 2) ?? end
  return {
    start,
    mid,
    end,
    rss: [mid.liveRss - start.liveRss, end.liveRss - mid.liveRss] as const,
    heap: [mid.liveHeap - start.liveHeap, end.liveHeap - mid.liveHeap] as const,
  }
}

/** Levelling off: the second half grew by at most a quarter of the first (or by under 2 MB). */
function levels([first, second]: readonly [number, number]): string {
  if (second <= Math.max(first * 0.25, 2 * 2 ** 20)) return 'levels off'
  if (second <= first * 0.6) return 'slows down'
  return 'keeps growing'
}

const signed = (bytes: number) => `${bytes >= 0 ? '+' : ''}${mb(bytes)} MB`

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
  const perRevocation = (r.end.liveHeap - r.start.liveHeap) / Math.max(1, last.revocations)
  // The whole loaded run by time, as the issue words it.
  const loaded = [idle, ...addr, ...rev]
  const w = halves(loaded, (s) => s.t, idle)
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
    'RSS is VmRSS of the service process. After each step, with no load running, a full GC is forced',
    'through the inspector; "after GC" figures are read then (live heap = V8 heap used).',
    failures ? `\n**${f0(failures)} requests failed (non-2xx or errors).**` : '',
    '',
    ...table(
      [
        's',
        'phase',
        'addresses seen',
        'revocations',
        'RSS MB',
        'RSS after GC MB',
        'live heap MB',
        'external MB',
      ],
      steps.map((s) => [
        s.t.toFixed(0),
        s.phase,
        f0(s.addresses),
        f0(s.revocations),
        mb(s.rss),
        mb(s.liveRss),
        mb(s.liveHeap),
        mb(s.external),
      ]),
      [true, false, true, true, true, true, true, true],
    ),
    '',
    `- Addresses: RSS after GC ${signed(a.rss[0])} over the first ${f0(a.mid.addresses)} addresses, ${signed(a.rss[1])} over the rest: **${levels(a.rss)}**; live heap ${signed(a.heap[0])}, ${signed(a.heap[1])}: **${levels(a.heap)}**.`,
    `- Revocations: RSS after GC ${signed(r.rss[0])} over the first ${f0(r.mid.revocations - lastAddr.revocations)} revocations, ${signed(r.rss[1])} over the rest: **${levels(r.rss)}**; live heap ${signed(r.heap[0])}, ${signed(r.heap[1])}: **${levels(r.heap)}**, ${f0(perRevocation)} bytes of live heap per revocation.`,
    `- Whole run split in two halves by time (at ${w.mid.t.toFixed(0)} s, ${w.mid.phase === 'addresses' ? 'in the address phase' : 'in the revocation phase'}): RSS after GC ${mb(idle.liveRss)} MB idle, ${mb(lastAddr.liveRss)} MB after the addresses, ${mb(last.liveRss)} MB at the end; it grew ${signed(w.rss[0])} in the first half and ${signed(w.rss[1])} in the second (${levels(w.rss)}); live heap ${signed(w.heap[0])}, ${signed(w.heap[1])} (${levels(w.heap)}).`,
    '',
    `**Verdict: the stores that grow with client addresses (rate-limit counters, capped at 100,000 keys) ${levels(a.heap) === 'levels off' ? 'level off' : `do not level off (${levels(a.heap)})`}: the live heap stopped growing once the cap was reached. The blocklist grows with revocations, about ${f0(perRevocation)} bytes of live heap each, and by design does not level off within a run: an entry is dropped only when its token expires (refresh tokens: REFRESH_TOKEN_EXPIRE_DAYS, 30 days by default), so its size is the number of revocations of the last 30 days.** A whole-run comparison by time mixes the two phases, so the per-phase lines above are the ones to read.`,
  ]
  return `${lines.filter((l, i) => l !== '' || lines[i - 1] !== '').join('\n')}\n`
}

/** `--report`: renders bench/results/memory.md again from memory.json (no run). */
function rerender(): void {
  const file = fileURLToPath(new URL('./results/memory.json', import.meta.url))
  const j = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    machine: string
    failures: number
    verify_seconds: number
    revocation_seconds: number
    steps: Sample[]
    samples: Sample[]
  }
  const md = report(j.machine, j.steps, j.failures, j.verify_seconds, j.revocation_seconds)
  fs.writeFileSync(file.replace(/\.json$/, '.md'), md)
  console.log(md)
}

if (process.argv[2] === '--report') {
  rerender()
  process.exit(0)
}

await main().then(
  () => process.exit(0),
  async (err) => {
    console.error(err)
    await abort(1)
  },
)
