/**
 * `npm run bench:login`: login under load.
 *
 *   (a) bare argon2id: the service's own checkPassword (src/platform/passwords.ts, @node-rs/argon2 with
 *       its OWASP parameters) verifying one stored hash, BENCH_LOGIN_CONNECTIONS (16) calls in flight,
 *       in a process pinned to CPU 0 like the service;
 *   (b) POST /auth/login of the real service (memory/sqlite, pinned to CPU 0), wrk with as many
 *       connections; ratio (b)/(a), goal ≥ 0.9. (a) and (b) alternate in BENCH_LOGIN_PAIRS (3) pairs
 *       of segments over BENCH_LOGIN_SECONDS (12) per side, and the ratio is the median of the pairs,
 *       so that other work on the machine hits both alike;
 *   (c) POST /tokens/verify at a fixed rate (BENCH_LOGIN_VERIFY_RATE, 100 req/s, open loop: latency
 *       counts from when a request was due, so a stalled server is not hidden), first alone, then while
 *       (b)'s login load saturates the service.
 * Also reads where the service spent its CPU during the login load, per thread name (/proc/<pid>/task):
 * the main thread runs the event loop, argon2 runs on libuv's pool threads.
 * Writes bench/results/login-load.md and login-load.json. A script, not a test.
 */
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { checkPassword, hashPassword } from '../src/platform/passwords.js'
import { LoadGenerator, type Measurement, type StaticLoad } from './lib/load.js'
import { abort, envNumber, guardRun, hasCommand, pinSelf, spawnPinned } from './lib/processes.js'
import { f0, f1, f2, machineLine, percentile, table, writeResults } from './lib/report.js'
import { BENCH_USER, STORES, startService } from './lib/service.js'

const SECONDS = Math.max(1, Math.round(envNumber('BENCH_LOGIN_SECONDS', 12)))
const PAIRS = Math.max(1, Math.round(envNumber('BENCH_LOGIN_PAIRS', 3)))
const SEGMENT_SECONDS = Math.max(1, Math.round(SECONDS / PAIRS))
const MIX_SECONDS = Math.max(1, Math.round(envNumber('BENCH_LOGIN_MIX_SECONDS', 10)))
const CONNECTIONS = Math.round(envNumber('BENCH_LOGIN_CONNECTIONS', 16))
const VERIFY_RATE = envNumber('BENCH_LOGIN_VERIFY_RATE', 100)
const TIME_LIMIT = envNumber('BENCH_TIME_LIMIT', 300)
const ADDRESSES = 20_000
const threadpool = process.env.UV_THREADPOOL_SIZE ?? '4 (libuv default)'

interface Bare {
  verifies: number
  seconds: number
  rps: number
  p50_ms: number
  p99_ms: number
  cpu_seconds: number
}

/** (a), in the child pinned to CPU 0: argon2id verifications, `concurrency` in flight, for `seconds`. */
async function bare(seconds: number, concurrency: number): Promise<void> {
  const stored = await hashPassword(BENCH_USER.password)
  const loop = async (until: number, latencies: number[] | undefined) => {
    while (performance.now() < until) {
      const t = performance.now()
      const { ok } = await checkPassword(stored, BENCH_USER.password)
      if (!ok) throw new Error('argon2 verify failed')
      latencies?.push(performance.now() - t)
    }
  }
  // A second of warm-up: the pool threads start, the 19 MiB blocks get allocated.
  const warm = performance.now() + 1000
  await Promise.all(Array.from({ length: concurrency }, () => loop(warm, undefined)))
  const latencies: number[] = []
  const cpu0 = process.cpuUsage()
  const start = performance.now()
  await Promise.all(Array.from({ length: concurrency }, () => loop(start + seconds * 1000, latencies)))
  const elapsed = (performance.now() - start) / 1000
  const cpu = process.cpuUsage(cpu0)
  latencies.sort((a, b) => a - b)
  const out: Bare = {
    verifies: latencies.length,
    seconds: elapsed,
    rps: latencies.length / elapsed,
    p50_ms: percentile(latencies, 50),
    p99_ms: percentile(latencies, 99),
    cpu_seconds: (cpu.user + cpu.system) / 1e6,
  }
  // spawnPinned throws the child's stdout away and keeps its stderr.
  console.error(`BARE ${JSON.stringify(out)}`)
}

async function runBare(seconds: number): Promise<Bare> {
  const self = fileURLToPath(import.meta.url)
  const repo = fileURLToPath(new URL('../', import.meta.url))
  const args = ['--import', import.meta.resolve('tsx'), self, '--bare', String(seconds), String(CONNECTIONS)]
  const proc = spawnPinned(0, args, process.env, repo)
  await new Promise<void>((resolve) => proc.child.once('exit', () => resolve()))
  const line = proc
    .stderr()
    .split('\n')
    .find((l) => l.startsWith('BARE '))
  if (!line) throw new Error(`bare argon2 run printed no result:\n${proc.stderr()}`)
  return JSON.parse(line.slice(5)) as Bare
}

/** CPU seconds per thread name of a process (/proc/<pid>/task/<tid>/stat and comm). */
function threadCpu(pid: number): Map<string, number> {
  const ticks = 100
  const out = new Map<string, number>()
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      // libuv's pool threads and V8's platform threads all carry the name "node" on Node 20.
      const name = tid === String(pid) ? 'main thread (event loop)' : 'other threads (libuv pool, V8)'
      out.set(name, (out.get(name) ?? 0) + (Number(f[11]) + Number(f[12])) / ticks)
    } catch {
      // thread ended while we read
    }
  }
  return out
}

function combineBare(parts: Bare[]): Bare {
  const verifies = parts.reduce((x, p) => x + p.verifies, 0)
  const seconds = parts.reduce((x, p) => x + p.seconds, 0)
  const w = (f: (p: Bare) => number) =>
    parts.reduce((x, p) => x + f(p) * p.verifies, 0) / Math.max(1, verifies)
  return {
    verifies,
    seconds,
    rps: verifies / seconds,
    // Percentiles of the segments weighted by their counts: close to, not exactly, the whole's.
    p50_ms: w((p) => p.p50_ms),
    p99_ms: w((p) => p.p99_ms),
    cpu_seconds: parts.reduce((x, p) => x + p.cpu_seconds, 0),
  }
}

function combineLogins(parts: Measurement[]): Measurement {
  const requests = parts.reduce((a, m) => a + m.requests, 0)
  const seconds = parts.reduce((a, m) => a + m.seconds, 0)
  const w = (f: (m: Measurement) => number) =>
    parts.reduce((a, m) => a + f(m) * m.requests, 0) / Math.max(1, requests)
  return {
    tool: parts[0]!.tool,
    requests,
    seconds,
    rps: requests / seconds,
    p50Ms: w((m) => m.p50Ms),
    p99Ms: w((m) => m.p99Ms),
    non2xx: parts.reduce((a, m) => a + m.non2xx, 0),
    errors: parts.reduce((a, m) => a + m.errors, 0),
    serverCpu: parts.reduce((a, m) => a + m.serverCpu, 0),
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

interface Latency {
  sent: number
  answered: number
  failed: number
  p50_ms: number
  p90_ms: number
  p99_ms: number
  max_ms: number
}

/**
 * POST /tokens/verify at `rate` per second for `seconds`, open loop: each request is due at a fixed
 * time and its latency counts from then, so time spent waiting for a free socket (the server being
 * slow) is in the figure.
 */
async function verifyAtRate(origin: string, token: string, rate: number, seconds: number): Promise<Latency> {
  const url = new URL('/tokens/verify', origin)
  const agent = new http.Agent({ keepAlive: true, maxSockets: 32 })
  const body = JSON.stringify({ token })
  const total = Math.round(rate * seconds)
  const latencies: number[] = []
  let failed = 0
  let sent = 0
  const start = performance.now()
  const pending: Promise<void>[] = []
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now()
      while (sent < total && start + (sent * 1000) / rate <= now) {
        const due = start + (sent * 1000) / rate
        const k = sent++
        pending.push(
          new Promise<void>((done) => {
            const req = http.request(
              url,
              {
                method: 'POST',
                agent,
                headers: {
                  'content-type': 'application/json',
                  'content-length': Buffer.byteLength(body),
                  'x-forwarded-for': `10.250.${(k >> 8) & 255}.${k & 255}`,
                },
              },
              (res) => {
                let text = ''
                res.setEncoding('utf8')
                res.on('data', (c: string) => {
                  text += c
                })
                res.on('end', () => {
                  if (res.statusCode === 200 && text.startsWith('{"valid":true'))
                    latencies.push(performance.now() - due)
                  else failed++
                  done()
                })
              },
            )
            req.on('error', () => {
              failed++
              done()
            })
            req.end(body)
          }),
        )
      }
      if (sent < total) setTimeout(tick, 1)
      else resolve()
    }
    tick()
  })
  await Promise.all(pending)
  agent.destroy()
  latencies.sort((a, b) => a - b)
  return {
    sent,
    answered: latencies.length,
    failed,
    p50_ms: percentile(latencies, 50),
    p90_ms: percentile(latencies, 90),
    p99_ms: percentile(latencies, 99),
    max_ms: latencies[latencies.length - 1] ?? Number.NaN,
  }
}

async function main(): Promise<void> {
  guardRun('login bench', TIME_LIMIT)
  if (!hasCommand('taskset')) throw new Error('login bench: taskset (util-linux) is required')
  pinSelf(1)
  const header = machineLine()
  console.log(header)

  const store = STORES.find((s) => s.name === 'memory/sqlite')!
  const service = await startService(store, { backends: {} })
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-bench-login-'))
  const generator = new LoadGenerator(hasCommand('wrk') ? 'wrk' : 'autocannon', workDir)
  try {
    const loginBody = JSON.stringify({ ...BENCH_USER, role: 'admin' })
    const loginLoad: StaticLoad = {
      kind: 'static',
      method: 'POST',
      path: '/auth/login',
      entries: Array.from({ length: ADDRESSES }, (_, i) => ({
        address: `10.${((i + 1) >> 16) & 255}.${((i + 1) >> 8) & 255}.${(i + 1) & 255}`,
        body: loginBody,
      })),
    }
    const { access_token } = await service.login()
    // Warm-up: JIT, the pool threads and their argon2 memory.
    await generator.measure(service, loginLoad, CONNECTIONS, 2)

    // (a) and (b) alternate in segments (a b, b a, ...), so that other work on the machine hits both
    // alike; the ratio is the median of the pairs'.
    console.log(
      `(a) bare argon2id and (b) POST /auth/login, ${CONNECTIONS} in flight, ${PAIRS} pairs of ${SEGMENT_SECONDS} s, both pinned to CPU 0 …`,
    )
    const bares: Bare[] = []
    const logins: Measurement[] = []
    const threadTotals = new Map<string, number>()
    const login = async () => {
      const before = threadCpu(service.pid)
      const m = await generator.measure(service, loginLoad, CONNECTIONS, SEGMENT_SECONDS)
      for (const [name, cpu] of threadCpu(service.pid))
        threadTotals.set(name, (threadTotals.get(name) ?? 0) + cpu - (before.get(name) ?? 0))
      logins.push(m)
      console.log(`    (b) ${f1(m.rps)} logins/s, p50 ${f1(m.p50Ms)} ms, p99 ${f1(m.p99Ms)} ms`)
    }
    const bareOnce = async () => {
      const r = await runBare(SEGMENT_SECONDS)
      bares.push(r)
      console.log(`    (a) ${f1(r.rps)} verifications/s, p50 ${f1(r.p50_ms)} ms, p99 ${f1(r.p99_ms)} ms`)
    }
    for (let i = 0; i < PAIRS; i++) {
      if (i % 2 === 0) {
        await bareOnce()
        await login()
      } else {
        await login()
        await bareOnce()
      }
    }
    const a = combineBare(bares)
    const b = combineLogins(logins)
    const pairRatios = logins.map((m, i) => m.rps / bares[i]!.rps)
    const ratio = median(pairRatios)
    const perThread = [...threadTotals]
      .map(([name, cpu_seconds]) => ({ name, cpu_seconds }))
      .filter((t) => t.cpu_seconds > 0.005)
      .sort((x, y) => y.cpu_seconds - x.cpu_seconds)
    console.log(
      `    logins / bare argon2id: ${f2(ratio)} (pairs ${pairRatios.map(f2).join(', ')}; totals ${f1(b.rps)} / ${f1(a.rps)} per s)`,
    )
    console.log(`    CPU by thread: ${perThread.map((t) => `${t.name} ${f2(t.cpu_seconds)} s`).join(', ')}`)

    console.log(`(c) verify at ${VERIFY_RATE} req/s alone, then under the login load …`)
    const alone = await verifyAtRate(service.origin, access_token, VERIFY_RATE, MIX_SECONDS)
    const [underLoad, mixLogin] = await Promise.all([
      verifyAtRate(service.origin, access_token, VERIFY_RATE, MIX_SECONDS),
      generator.measure(service, loginLoad, CONNECTIONS, MIX_SECONDS),
    ])
    console.log(`    alone: p50 ${f2(alone.p50_ms)} ms, p99 ${f2(alone.p99_ms)} ms`)
    console.log(
      `    mixed: p50 ${f2(underLoad.p50_ms)} ms, p99 ${f2(underLoad.p99_ms)} ms; logins ${f1(mixLogin.rps)}/s`,
    )

    const md = report(header, a, b, ratio, pairRatios, perThread, alone, underLoad, mixLogin)
    console.log(`\n${md}`)
    writeResults('login-load', md, {
      machine: header,
      seconds: SECONDS,
      pairs: PAIRS,
      connections: CONNECTIONS,
      uv_threadpool_size: threadpool,
      bare_argon2id: a,
      login: b,
      ratio,
      pair_ratios: pairRatios,
      bare_segments: bares,
      login_segments: logins,
      login_cpu_by_thread: perThread,
      verify_rate: VERIFY_RATE,
      verify_alone: alone,
      verify_under_login_load: underLoad,
      login_during_mix: mixLogin,
    })
  } finally {
    await service.dispose()
    fs.rmSync(workDir, { recursive: true, force: true })
  }
}

function report(
  header: string,
  a: Bare,
  b: Measurement,
  ratio: number,
  pairRatios: number[],
  perThread: { name: string; cpu_seconds: number }[],
  alone: Latency,
  mixed: Latency,
  mixLogin: Measurement,
): string {
  const total = perThread.reduce((s, t) => s + t.cpu_seconds, 0)
  const main = perThread.find((t) => t.name.startsWith('main'))?.cpu_seconds ?? 0
  const lat = (name: string, l: Latency) => [
    name,
    f0(l.sent),
    f0(l.answered),
    f0(l.failed),
    f2(l.p50_ms),
    f2(l.p90_ms),
    f2(l.p99_ms),
    f2(l.max_ms),
  ]
  return [
    '# Login under load',
    '',
    header,
    '',
    `Everything under test is pinned to CPU 0 (\`taskset -c 0\`), the load generators to CPU 1; ${CONNECTIONS} requests`,
    `in flight; UV_THREADPOOL_SIZE ${threadpool}. (a) and (b) alternate in ${PAIRS} pairs of ${SEGMENT_SECONDS} s (a b, b a, ...),`,
    `so other work on the machine hits both alike; (c) runs ${MIX_SECONDS} s alone and ${MIX_SECONDS} s mixed.`,
    '',
    '| measurement | per second | p50 ms | p99 ms | CPU use | CPU ms each |',
    '|---|--:|--:|--:|--:|--:|',
    `| (a) bare argon2id: the service's checkPassword, ${CONNECTIONS} in flight | ${f1(a.rps)} | ${f1(a.p50_ms)} | ${f1(a.p99_ms)} | ${Math.round((100 * a.cpu_seconds) / a.seconds)} % | ${f2((1000 * a.cpu_seconds) / a.verifies)} |`,
    `| (b) POST /auth/login, ${b.tool} ${CONNECTIONS} connections${b.non2xx || b.errors ? ` (${b.non2xx} non-2xx, ${b.errors} errors)` : ''} | ${f1(b.rps)} | ${f1(b.p50Ms)} | ${f1(b.p99Ms)} | ${Math.round((100 * b.serverCpu) / b.seconds)} % | ${f2((1000 * b.serverCpu) / b.requests)} |`,
    `| (b) during the mix (c), logins only | ${f1(mixLogin.rps)} | ${f1(mixLogin.p50Ms)} | ${f1(mixLogin.p99Ms)} | ${Math.round((100 * mixLogin.serverCpu) / mixLogin.seconds)} % | - |`,
    '',
    `**Login throughput / bare argon2id throughput: ${f2(ratio)}** (goal ≥ 0.9; median of the pairs ${pairRatios.map(f2).join(', ')}).`,
    '',
    `CPU per login ${f2((1000 * b.serverCpu) / b.requests)} ms against ${f2((1000 * a.cpu_seconds) / a.verifies)} ms per bare verification: with everything on one core, the ratio can be at most about ${f2((1000 * a.cpu_seconds) / a.verifies / ((1000 * b.serverCpu) / b.requests))}, and reaching 0.9 there would need the rest of a login (HTTP, JSON, SQLite, JWT, audit, logging) to cost at most ${f2((1000 * a.cpu_seconds) / a.verifies / 9)} ms of CPU.`,
    '',
    `Where the service's CPU went during (b): ${perThread.map((t) => `${t.name} ${f2(t.cpu_seconds)} s`).join(', ')}; the main thread (event loop: HTTP, JSON, SQLite, JWT) used ${Math.round((100 * main) / Math.max(total, 1e-9))} % of it.`,
    '',
    `(c) POST /tokens/verify of a valid access token at ${VERIFY_RATE} req/s, open loop (latency from when each request was due):`,
    '',
    ...table(
      ['verify', 'sent', 'valid answers', 'failed', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms'],
      [lat('alone', alone), lat('while logins saturate the service', mixed)],
      [false, true, true, true, true, true, true, true],
    ),
    '',
    "@node-rs/argon2 runs each hash or verify as a napi async task on libuv's thread pool, so the event",
    'loop is never blocked by a hash: it keeps answering verify while the pool threads compute. But all',
    "of the service's threads share CPU 0 here: the pool threads (up to UV_THREADPOOL_SIZE of them at",
    'once) and the main thread are scheduled side by side, so under a login flood the event loop gets',
    'only its fair share of the core and verify waits for the scheduler, not for argon2 to finish. On a',
    'machine with a spare core per pool thread that wait goes; on 2 cores, with the load generator on',
    'the second, it cannot.',
    '',
  ].join('\n')
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv[2] === '--bare')
    await bare(Number(process.argv[3]), Number(process.argv[4])).then(
      () => process.exit(0),
      (err) => {
        console.error(err)
        process.exit(1)
      },
    )
  else
    await main().then(
      () => process.exit(0),
      async (err) => {
        console.error(err)
        await abort(1)
      },
    )
}
