/**
 * `npm run bench`: throughput and latency of wristband beside a bare node:http server, on one core.
 * See bench/README.md for what is measured, how, and the settings (BENCH_* environment variables).
 */
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Request } from 'autocannon'
import { JwtCodec } from '../src/tokens/jwt.js'
import {
  type Entry,
  type Load,
  LoadGenerator,
  type Measurement,
  type StaticLoad,
  type Tool,
} from './lib/load.js'
import { abort, envNumber, guardRun, hasCommand, onAbort, pinSelf } from './lib/processes.js'
import {
  type Backends,
  BENCH_SECRET,
  BENCH_USER,
  checkPostgres,
  checkRedis,
  type Server,
  type Service,
  STORES,
  startReference,
  startService,
} from './lib/service.js'
import type { PartnerBenchResult } from './partner-bench.js'
import type { TransferManyRow } from './transfer-many-bench.js'

const DURATION = envNumber('BENCH_DURATION', 10)
// wrk takes whole seconds.
const WARMUP = Math.max(1, Math.round(envNumber('BENCH_WARMUP', 2)))
const SEGMENTS = Math.round(envNumber('BENCH_SEGMENTS', 5))
const SEGMENT_SECONDS = Math.max(1, Math.round(DURATION / SEGMENTS))
const ADDRESSES = envNumber('BENCH_ADDRESSES', 65_536)
/** Distinct valid tokens of verify-access (and, tampered, of verify-invalid): closer to real traffic than one. */
const TOKENS = envNumber('BENCH_TOKENS', 200)
const DISTINCT_TOKENS = envNumber('BENCH_DISTINCT_TOKENS', 20_000)
const TIME_LIMIT = envNumber('BENCH_TIME_LIMIT', 900)
const ONLY_SCENARIOS = (process.env.BENCH_SCENARIOS ?? '').split(',').filter(Boolean)
const ONLY_STORES = (process.env.BENCH_STORES ?? '').split(',').filter(Boolean)
const PROFILE_DIR = process.env.BENCH_PROFILE
const NICE = Number(process.env.BENCH_NICE ?? 0)
if (!Number.isInteger(NICE) || NICE < -20 || NICE > 19) throw new Error('BENCH_NICE must be -20..19')
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL || undefined
/** Extra settings of the service under test, `NAME=value,NAME=value` (e.g. `VERIFY_FAST_LANE=false`). */
const SERVICE_ENV = Object.fromEntries(
  (process.env.BENCH_SERVICE_ENV ?? '')
    .split(',')
    .filter(Boolean)
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
)
const OFF = new Set(['', 'off', 'none', '0'])
const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'

const resultsDir = fileURLToPath(new URL('./results/', import.meta.url))
const benchDir = fileURLToPath(new URL('.', import.meta.url))

/** Client addresses of the load: 10.x.y.z, far more of them than one minute at the route's limit needs. */
function address(i: number): string {
  const k = (i % ADDRESSES) + 1
  return `10.${(k >> 16) & 255}.${(k >> 8) & 255}.${k & 255}`
}

function staticLoad(urlPath: string, bodies: string[]): StaticLoad {
  const n = Math.max(ADDRESSES, bodies.length)
  const entries: Entry[] = []
  for (let i = 0; i < n; i++) entries.push({ address: address(i), body: bodies[i % bodies.length]! })
  return { kind: 'static', method: 'POST', path: urlPath, entries }
}

const verifyBody = (token: string, apiKey?: string) =>
  JSON.stringify(apiKey === undefined ? { token } : { token, api_key: apiKey })

/** GET /tokens/check as a gateway asks it: the token as a bearer, the gateway's credential as `api_key`. */
function checkLoad(tokens: string[], apiKey?: string): StaticLoad {
  const n = Math.max(ADDRESSES, tokens.length)
  const entries: Entry[] = []
  for (let i = 0; i < n; i++) {
    const headers: Record<string, string> = { authorization: `Bearer ${tokens[i % tokens.length]!}` }
    if (apiKey !== undefined) headers.api_key = apiKey
    entries.push({ address: address(i), body: '', headers })
  }
  return { kind: 'static', method: 'GET', path: '/tokens/check', entries }
}

interface Prepared {
  load: Load
  /** What the baseline gets: the same bytes on the wire (a static copy for dynamic loads). */
  baselineLoad: StaticLoad
  /** A sample request and what its answer must look like, checked before the load starts. */
  check: { body: unknown; expect: (status: number, body: string) => boolean }
  /** Runs before every load on the service (the refresh pool is topped up here). */
  beforeRun?: () => Promise<void>
  /** A server to measure instead of the service (stopped after the row). */
  target?: Server
}

interface Scenario {
  id: string
  title: string
  connections: number
  stores: string[]
  prepare(service: Service): Promise<Prepared>
}

const isValid = (want: boolean) => (status: number, body: string) =>
  status === 200 && (JSON.parse(body) as { valid: boolean }).valid === want

/** The gateways' check of the same tokens as verifyScenario's, with or without a verify credential. */
function checkScenario(id: string, title: string, credentialed: boolean): Scenario {
  return {
    id,
    title,
    connections: 64,
    stores: ALL,
    async prepare(service) {
      const tokens = distinctTokens((await service.login()).access_token, TOKENS)
      const load = checkLoad(tokens, credentialed ? service.verifyCredential : undefined)
      return { load, baselineLoad: load, check: { body: null, expect: (status) => status === 200 } }
    },
  }
}

function verifyScenario(
  id: string,
  title: string,
  stores: string[],
  tokens: (s: Service) => Promise<string[]>,
  valid: boolean,
  credentialed = false,
): Scenario {
  return {
    id,
    title,
    connections: 64,
    stores,
    async prepare(service) {
      const list = await tokens(service)
      const key = credentialed ? service.verifyCredential : undefined
      const load = staticLoad(
        '/tokens/verify',
        list.map((token) => verifyBody(token, key)),
      )
      const body = key === undefined ? { token: list[0] } : { token: list[0], api_key: key }
      return { load, baselineLoad: load, check: { body, expect: isValid(valid) } }
    },
  }
}

/** A token whose signature is wrong in one character: decoded, parsed and HMAC-checked, then refused. */
function tamper(token: string): string {
  const i = token.lastIndexOf('.') + 5
  return token.slice(0, i) + (token[i] === 'A' ? 'B' : 'A') + token.slice(i + 1)
}

/** Tokens exactly as the service issues them, one per simulated session, signed with its secret. */
function distinctTokens(access: string, count: number): string[] {
  const payload = JSON.parse(Buffer.from(access.split('.')[1]!, 'base64url').toString()) as Record<
    string,
    unknown
  >
  for (const k of ['jti', 'iat', 'exp', 'aud', 'iss']) delete payload[k]
  const codec = new JwtCodec({
    secret: BENCH_SECRET,
    previousSecrets: [],
    audience: 'wristband',
    issuer: 'wristband',
    clock: { now: () => Date.now() },
  })
  return Array.from({ length: count }, () => codec.issue(payload, 15 * 60).token)
}

const ALL = STORES.map((s) => s.name)

const SCENARIOS: Scenario[] = [
  {
    id: 'fastify-fixed',
    title: 'reference: Fastify answering the fixed verify answer',
    connections: 64,
    stores: ['memory/sqlite'],
    async prepare(service) {
      const token = (await service.login()).access_token
      const answer = await service.post('/tokens/verify', { token })
      const load = staticLoad('/tokens/verify', [verifyBody(token)])
      return {
        load,
        baselineLoad: load,
        check: { body: { token }, expect: isValid(true) },
        target: await startReference('fastify', answer.body),
      }
    },
  },
  {
    id: 'read-body-fixed',
    title: 'reference: node:http reading the body, answering the fixed answer with the service’s headers',
    connections: 64,
    stores: ['memory/sqlite'],
    async prepare(service) {
      const token = (await service.login()).access_token
      const answer = await service.post('/tokens/verify', { token })
      const load = staticLoad('/tokens/verify', [verifyBody(token)])
      return {
        load,
        baselineLoad: load,
        check: { body: { token }, expect: isValid(true) },
        target: await startReference('read-body', answer.body, answer.headers),
      }
    },
  },
  verifyScenario(
    'verify-access',
    `verify: ${TOKENS} valid access tokens`,
    ALL,
    async (s) => distinctTokens((await s.login()).access_token, TOKENS),
    true,
  ),
  verifyScenario(
    'verify-credentialed',
    `verify: ${TOKENS} valid access tokens, with a verify credential`,
    ALL,
    async (s) => distinctTokens((await s.login()).access_token, TOKENS),
    true,
    true,
  ),
  checkScenario('check-access', `check (gateways): ${TOKENS} valid access tokens, GET with a bearer`, false),
  checkScenario(
    'check-credentialed',
    `check (gateways): ${TOKENS} valid access tokens, with a verify credential`,
    true,
  ),
  verifyScenario(
    'verify-invalid',
    `verify: ${TOKENS} invalid tokens (bad signature)`,
    ['memory/sqlite', 'redis/sqlite'],
    async (s) => distinctTokens((await s.login()).access_token, TOKENS).map(tamper),
    false,
  ),
  verifyScenario(
    'verify-refresh',
    'verify: refresh token',
    ['memory/sqlite'],
    async (s) => [(await s.login()).refresh_token],
    true,
  ),
  verifyScenario(
    'verify-apikey',
    'verify: API key',
    ['memory/sqlite', 'redis/sqlite', 'memory/postgres'],
    async (s) => [s.apiKey],
    true,
  ),
  verifyScenario(
    'verify-distinct',
    `verify: ${DISTINCT_TOKENS} distinct access tokens`,
    ['memory/sqlite'],
    async (s) => distinctTokens((await s.login()).access_token, DISTINCT_TOKENS),
    true,
  ),
  {
    id: 'login',
    title: 'login (argon2id)',
    connections: 16,
    stores: ['memory/sqlite'],
    async prepare() {
      const body = { ...BENCH_USER, role: 'admin' }
      const load = staticLoad('/auth/login', [JSON.stringify(body)])
      return {
        load,
        baselineLoad: load,
        check: { body, expect: (status) => status === 200 },
      }
    },
  },
  {
    id: 'refresh',
    title: 'refresh (rotation)',
    connections: 16,
    stores: ALL,
    async prepare(service) {
      // Each refresh token is good for one rotation: a pool holds the live ones, every answer puts its
      // successor back, and no token is ever in two requests at once (that would be reuse).
      // Tokens in flight when a run stops are rotated but their answers are lost: refill before each run.
      const pool: string[] = []
      const fill = async () => {
        while (pool.length < this.connections + 8) pool.push((await service.login()).refresh_token)
      }
      const check = (await service.login()).refresh_token
      let n = 0
      const request: Request = {
        method: 'POST',
        path: '/auth/refresh',
        setupRequest: (req) => {
          const token = pool.shift()
          if (!token) throw new Error('refresh pool ran dry: refreshes are failing')
          return {
            ...req,
            headers: { 'content-type': 'application/json', 'x-forwarded-for': address(n++) },
            body: JSON.stringify({ refresh_token: token }),
          }
        },
        onResponse: (status, body) => {
          if (status === 200) pool.push((JSON.parse(body) as { refresh_token: string }).refresh_token)
        },
      }
      return {
        load: { kind: 'dynamic', request },
        baselineLoad: staticLoad('/auth/refresh', [JSON.stringify({ refresh_token: check })]),
        check: { body: { refresh_token: check }, expect: (status) => status === 200 },
        beforeRun: fill,
      }
    },
  },
]

/** The scenario's first request (a GET load's first entry, else a POST of `check.body`), before the load. */
async function probeOf(service: Service, prepared: Prepared): Promise<{ status: number; body: string }> {
  const load = prepared.baselineLoad
  if (load.method === 'GET') {
    const e = load.entries[0]!
    const res = await fetch(`${service.origin}${load.path}`, {
      headers: { ...e.headers, 'x-forwarded-for': '192.168.0.1' },
    })
    return { status: res.status, body: await res.text() }
  }
  return service.post(load.path, prepared.check.body, '192.168.0.1')
}

interface Row {
  scenario: string
  id: string
  store: string
  tool: Tool
  connections: number
  rps: number
  p50_ms: number
  p99_ms: number
  baseline_rps: number
  baseline_p99_ms: number
  /** Median of `pair_ratios`. */
  ratio: number
  /** Service req/s over baseline req/s of each adjacent pair of segments. */
  pair_ratios: number[]
  /** Median of `pair_cpu_ratios`. */
  cpu_ratio: number
  /** Requests per CPU-second of the service over the baseline's, for each pair: a cost ratio that
   * other work on the machine does not skew. */
  pair_cpu_ratios: number[]
  /** Share of its CPU the server used while loaded (1 = saturated); less means the load generator or
   * other processes held it back. */
  service_cpu: number
  baseline_cpu: number
  requests: number
  non2xx: number
  errors: number
}

function combine(parts: Measurement[]): Measurement {
  const requests = parts.reduce((a, m) => a + m.requests, 0)
  const seconds = parts.reduce((a, m) => a + m.seconds, 0)
  const weighted = (f: (m: Measurement) => number) =>
    parts.reduce((a, m) => a + f(m) * m.requests, 0) / Math.max(1, requests)
  return {
    tool: parts[0]!.tool,
    requests,
    seconds,
    rps: requests / seconds,
    // Percentiles of the halves, weighted by their request counts: close to, not exactly, the whole's.
    p50Ms: weighted((m) => m.p50Ms),
    p99Ms: weighted((m) => m.p99Ms),
    non2xx: parts.reduce((a, m) => a + m.non2xx, 0),
    errors: parts.reduce((a, m) => a + m.errors, 0),
    serverCpu: parts.reduce((a, m) => a + m.serverCpu, 0),
  }
}

function machine() {
  const cpus = os.cpus()
  let wrk: string | undefined
  try {
    wrk = execFileSync('wrk', ['-v'], { encoding: 'utf8' })
  } catch (err) {
    // wrk -v exits with status 1 after printing its version.
    wrk = String((err as { stdout?: string }).stdout ?? '')
  }
  wrk = /\b(\d+\.\d+\.\d+)/.exec(wrk)?.[1]
  return {
    cpu: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    node: process.version,
    os: `${os.type()} ${os.release()}`,
    memory_gb: Math.round(os.totalmem() / 2 ** 30),
    wrk,
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

const f0 = (n: number) => Math.round(n).toLocaleString('en-US')
const f2 = (n: number) => n.toFixed(2)
const unsaturated = (r: Row) => Math.min(r.service_cpu, r.baseline_cpu) < 0.9
const pct = (n: number) => `${Math.round(n * 100)} %`

function markdown(
  m: ReturnType<typeof machine>,
  rows: Row[],
  notes: string[],
  started: Date,
  load: number[][],
): string {
  const lines = [
    `# wristband bench, ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memory_gb} GB, Node ${m.node}, ${m.os}; load average`,
    `${load.map((l) => l.map((x) => x.toFixed(2)).join(' ')).join(' at start, ')} at the end.`,
    '',
    'The server (`wristband serve`, or the bare node:http baseline answering a fixed verify answer) is',
    'pinned to CPU 0, the load generator to CPU 1. After a warm-up of the service, each row alternates',
    `baseline and service in ${SEGMENTS} segment pairs (${SEGMENT_SECONDS} s each side); the baseline gets the`,
    "same requests. `ratio` is the median of the pairs' service/baseline req/s. Rate limits and revocation",
    `checks stay on: the load comes from ${ADDRESSES.toLocaleString('en-US')} X-Forwarded-For addresses.`,
    `Service log level: ${LOG_LEVEL ?? 'default (info)'}; its output goes to /dev/null.${NICE ? ` Bench, servers and load generator ran at nice ${NICE}.` : ''}`,
    '',
    '| scenario | store | tool | conn | req/s | p50 ms | p99 ms | baseline req/s | baseline p99 ms | ratio | ratio per CPU-s | CPU use svc / base |',
    '|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
    ...rows
      .map((r) =>
        [
          `${r.scenario}${r.non2xx || r.errors ? ` (${r.non2xx} non-2xx, ${r.errors} errors)` : ''}`,
          r.store,
          r.tool,
          r.connections,
          f0(r.rps),
          f2(r.p50_ms),
          f2(r.p99_ms),
          f0(r.baseline_rps),
          f2(r.baseline_p99_ms),
          `${r.ratio.toFixed(3)}${unsaturated(r) ? ' †' : ''}`,
          r.cpu_ratio.toFixed(3),
          `${pct(r.service_cpu)} / ${pct(r.baseline_cpu)}`,
        ].join(' | '),
      )
      .map((line) => `| ${line} |`),
  ]
  if (rows.some(unsaturated))
    lines.push(
      '',
      '† A server used less than 90 % of its core: the load generator or other work on the machine held',
      'it back, so its req/s and the raw ratio are not comparable; go by the ratio per CPU-second.',
    )
  if (notes.length) lines.push('', ...notes.map((n) => `- ${n}`))
  return `${lines.join('\n')}\n`
}

async function main(): Promise<void> {
  const started = new Date()
  guardRun('bench', TIME_LIMIT)

  if (!hasCommand('taskset')) throw new Error('bench: taskset (util-linux) is required to pin processes')
  if (os.cpus().length < 2) throw new Error('bench: needs two CPUs (one for the server, one for the load)')
  pinSelf(1, NICE)

  const requested = process.env.BENCH_TOOL
  if (requested && requested !== 'wrk' && requested !== 'autocannon')
    throw new Error('BENCH_TOOL must be wrk or autocannon')
  const tool: Tool =
    requested === 'autocannon' || !hasCommand('wrk') ? 'autocannon' : (requested as Tool) || 'wrk'
  const notes: string[] = []
  if (tool === 'autocannon' && requested !== 'autocannon')
    notes.push('wrk is not installed: autocannon (one worker) generated all load.')

  const backends: Backends = {}
  if (!OFF.has(DATABASE_URL)) {
    const why = await checkPostgres(DATABASE_URL)
    if (why) notes.push(`PostgreSQL at ${DATABASE_URL} unreachable (${why}): its rows skipped.`)
    else backends.databaseUrl = DATABASE_URL
  } else notes.push('PostgreSQL switched off (BENCH_DATABASE_URL): its rows skipped.')
  if (!OFF.has(REDIS_URL)) {
    const why = await checkRedis(REDIS_URL)
    if (why) notes.push(`Redis at ${REDIS_URL} unreachable (${why}): its rows skipped.`)
    else backends.redisUrl = REDIS_URL
  } else notes.push('Redis switched off (BENCH_REDIS_URL): its rows skipped.')
  for (const n of notes) console.log(`note: ${n}`)

  const stores = STORES.filter(
    (s) =>
      (ONLY_STORES.length === 0 || ONLY_STORES.includes(s.name)) &&
      (s.database === 'sqlite' || backends.databaseUrl) &&
      (s.state === 'memory' || backends.redisUrl),
  )
  const scenarios = SCENARIOS.filter((s) => ONLY_SCENARIOS.length === 0 || ONLY_SCENARIOS.includes(s.id))
  const unknown = [
    ...ONLY_SCENARIOS.filter((id) => !SCENARIOS.some((s) => s.id === id)),
    ...ONLY_STORES.filter((name) => !STORES.some((s) => s.name === name)),
  ]
  if (unknown.length)
    throw new Error(
      `unknown in BENCH_SCENARIOS/BENCH_STORES: ${unknown.join(', ')}; scenarios: ${SCENARIOS.map((s) => s.id).join(', ')}; stores: ${STORES.map((s) => s.name).join(', ')}`,
    )
  const m = machine()
  const loadStart = os.loadavg()
  // The bench itself keeps both CPUs busy; anything much above that is someone else's work.
  if (loadStart[0]! > 1) {
    const busy = `The machine was busy before the run (load average ${loadStart[0]!.toFixed(1)} on ${m.cores} CPUs): expect noisy req/s; the ratio per CPU-second holds up better.`
    notes.push(busy)
    console.log(`note: ${busy}`)
  }
  console.log(
    `machine: ${m.cpu}, ${m.cores} cores, ${m.memory_gb} GB, Node ${m.node}, ${m.os}; load: ${tool === 'wrk' ? `wrk ${m.wrk}` : 'autocannon'}`,
  )

  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-bench-load-'))
  onAbort(async () => fs.rmSync(workDir, { recursive: true, force: true }))
  const generator = new LoadGenerator(tool, workDir)
  if (PROFILE_DIR) fs.mkdirSync(PROFILE_DIR, { recursive: true })
  let baseline: Server | undefined
  const rows: Row[] = []
  try {
    for (const store of stores) {
      const mine = scenarios.filter((s) => s.stores.includes(store.name))
      if (mine.length === 0) continue
      console.log(`\n== ${store.name}: starting wristband serve`)
      const service = await startService(store, {
        backends,
        ...(LOG_LEVEL ? { logLevel: LOG_LEVEL } : {}),
        env: SERVICE_ENV,
        ...(PROFILE_DIR ? { profileDir: path.resolve(PROFILE_DIR) } : {}),
      })
      try {
        if (!baseline) {
          // The baseline answers with a real verify answer, byte for byte.
          const { access_token } = await service.login()
          const answer = await service.post('/tokens/verify', { token: access_token })
          baseline = await startReference('baseline', answer.body)
          await generator.measure(baseline, staticLoad('/', [verifyBody(access_token)]), 64, WARMUP)
        }
        for (const scenario of mine) {
          const prepared = await scenario.prepare(service)
          const probe = await probeOf(service, prepared)
          if (!prepared.check.expect(probe.status, probe.body))
            throw new Error(`${scenario.id}: unexpected answer ${probe.status} ${probe.body.slice(0, 200)}`)
          const n = scenario.connections
          const target = prepared.target ?? service
          const onService = async (seconds: number) => {
            await prepared.beforeRun?.()
            return generator.measure(target, prepared.load, n, seconds)
          }
          const onBaseline = (seconds: number) =>
            generator.measure(baseline!, prepared.baselineLoad, n, seconds, generator.toolFor(prepared.load))
          if (PROFILE_DIR && !fs.existsSync(path.join(PROFILE_DIR, 'load-start.json'))) {
            // V8's profile clock and hrtime are both CLOCK_MONOTONIC: lets bench/profile.ts drop start-up.
            const monotonic_us = Number(process.hrtime.bigint() / 1000n)
            fs.writeFileSync(path.join(PROFILE_DIR, 'load-start.json'), JSON.stringify({ monotonic_us }))
          }
          await onService(WARMUP)
          // Baseline and service alternate in short segments (B S, S B, B S, ...), so that drift and
          // bursts of other work on the machine hit both alike; the ratio is the median of the pairs.
          const pairs: { b: Measurement; s: Measurement }[] = []
          for (let i = 0; i < SEGMENTS; i++) {
            if (i % 2 === 0) {
              const b = await onBaseline(SEGMENT_SECONDS)
              pairs.push({ b, s: await onService(SEGMENT_SECONDS) })
            } else {
              const sv = await onService(SEGMENT_SECONDS)
              pairs.push({ s: sv, b: await onBaseline(SEGMENT_SECONDS) })
            }
          }
          const s = combine(pairs.map((p) => p.s))
          const b = combine(pairs.map((p) => p.b))
          const ratios = pairs.map((p) => p.s.rps / p.b.rps)
          const perCpu = (m: Measurement) => m.requests / Math.max(m.serverCpu, 1e-3)
          const cpuRatios = pairs.map((p) => perCpu(p.s) / perCpu(p.b))
          const row: Row = {
            scenario: scenario.title,
            id: scenario.id,
            store: prepared.target ? '-' : store.name,
            tool: s.tool,
            connections: n,
            rps: s.rps,
            p50_ms: s.p50Ms,
            p99_ms: s.p99Ms,
            baseline_rps: b.rps,
            baseline_p99_ms: b.p99Ms,
            ratio: median(ratios),
            pair_ratios: ratios.map((r) => Number(r.toFixed(3))),
            cpu_ratio: median(cpuRatios),
            pair_cpu_ratios: cpuRatios.map((r) => Number(r.toFixed(3))),
            service_cpu: s.serverCpu / s.seconds,
            baseline_cpu: b.serverCpu / b.seconds,
            requests: s.requests,
            non2xx: s.non2xx,
            errors: s.errors,
          }
          await prepared.target?.stop()
          rows.push(row)
          console.log(
            `${row.scenario.padEnd(40)} ${row.store.padEnd(16)} ${f0(row.rps).padStart(7)} req/s  p50 ${f2(row.p50_ms)} ms  p99 ${f2(row.p99_ms)} ms  baseline ${f0(row.baseline_rps)} req/s  ratio ${row.ratio.toFixed(3)}  per CPU-s ${row.cpu_ratio.toFixed(3)}  cpu ${pct(row.service_cpu)}/${pct(row.baseline_cpu)}${row.non2xx || row.errors ? `  (${row.non2xx} non-2xx, ${row.errors} errors)` : ''}`,
          )
        }
      } finally {
        await service.dispose()
      }
    }
  } finally {
    await baseline?.stop()
    fs.rmSync(workDir, { recursive: true, force: true })
  }

  const partial =
    ONLY_SCENARIOS.length > 0 ||
    ONLY_STORES.length > 0 ||
    PROFILE_DIR !== undefined ||
    Object.keys(SERVICE_ENV).length > 0
  const extras = partial || process.env.BENCH_EXTRAS === '0' ? undefined : runExtras()
  const md =
    markdown(m, rows, notes, started, [loadStart, os.loadavg()]) +
    (extras ? `\n${extras.partnerMd}\n${extras.verifierMd}` : '')
  const name = partial ? 'partial' : 'latest'
  fs.mkdirSync(resultsDir, { recursive: true })
  fs.writeFileSync(path.join(resultsDir, `${name}.md`), md)
  fs.writeFileSync(
    path.join(resultsDir, `${name}.json`),
    `${JSON.stringify(
      {
        started: started.toISOString(),
        machine: m,
        settings: {
          duration_s: DURATION,
          warmup_s: WARMUP,
          segments: SEGMENTS,
          addresses: ADDRESSES,
          tool,
          log_level: LOG_LEVEL ?? 'info',
          nice: NICE,
        },
        load_average: { start: loadStart, end: os.loadavg() },
        notes,
        rows,
        ...(extras
          ? {
              partner: extras.partner,
              transfer_many: extras.transferMany,
              verifier_client: extras.verifierTable,
            }
          : {}),
      },
      null,
      2,
    )}\n`,
  )
  console.log(`\n${md}`)
  console.log(`written: bench/results/${name}.md and bench/results/${name}.json`)
  if (PROFILE_DIR)
    console.log(
      `CPU profiles in ${PROFILE_DIR}; summarise with: node --import tsx bench/profile.ts ${PROFILE_DIR}`,
    )
}

/**
 * The partner API (transfers/s, ticket uses/s, USED → webhook receiver latency) and the verifier
 * client (a guarded backend with a warm cache beside the same backend unguarded), each beside its own
 * baseline. They run as child processes because each pins its processes its own way.
 */
function runExtras() {
  const run = (file: string) =>
    execFileSync(process.execPath, ['--import', 'tsx', path.join(benchDir, file)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      timeout: 300_000,
    })
  console.log('\n== partner API (bench/partner-bench.ts)')
  const partnerOut = run('partner-bench.ts')
  const partner = JSON.parse(partnerOut.trim().split('\n').at(-1)!) as PartnerBenchResult
  const r = (x: { rps: number; p99_ms: number }) =>
    `${f0(x.rps)} | ${f2(x.p99_ms)} | ${(x.rps / partner.baseline.rps).toFixed(3)}`
  const partnerMd = [
    '## Partner API (SQLite, in-process state; 10 connections)',
    '',
    '| what | req/s | p99 ms | ratio to node:http |',
    '|---|--:|--:|--:|',
    `| bare node:http baseline | ${f0(partner.baseline.rps)} | ${f2(partner.baseline.p99_ms)} | 1 |`,
    `| POST /companies/transfer | ${r(partner.transfers)} |`,
    `| POST /tickets/{uid}/use | ${r(partner.ticket_uses)} |`,
    '',
    `Time from a ticket use to the webhook receiver reading its notification: p50 ${partner.webhook_latency_ms.p50} ms, p99 ${partner.webhook_latency_ms.p99} ms (${partner.webhook_latency_ms.samples} samples).`,
    '',
  ].join('\n')
  console.log(partnerMd)
  console.log('\n== 10,000 transfers through the partner client (bench/transfer-many-bench.ts)')
  const manyOut = run('transfer-many-bench.ts')
  const many = JSON.parse(manyOut.trim().split('\n').at(-1)!) as TransferManyRow[]
  const manyMd = [
    '## On-sale: transfers through `transferMany` (POST /companies/transfers, chunks of 500, 2 in flight)',
    '',
    '| database | holder e-mails | transfers | seconds | transfers/s | e-mails (tickets in them) | last e-mail at |',
    '|---|---|--:|--:|--:|--:|--:|',
    ...many.map((m) =>
      m.skipped
        ? `| ${m.database} | ${m.emails ? 'sent meanwhile' : 'off'} | ${m.transfers} | skipped: ${m.skipped} | | | |`
        : `| ${m.database} | ${m.emails ? 'sent meanwhile' : 'off'} | ${m.transfers} | ${f2(m.seconds)} | ${f0(m.per_second)} | ${m.mails ? `${f0(m.mails.received)} (${f0(m.mails.tickets)}, ${f0(m.mails.distinct_tickets)} distinct)` : ''} | ${m.mails ? `${f2(m.mails.last_at_seconds)} s` : ''} |`,
    ),
    '',
  ].join('\n')
  console.log(manyMd)
  console.log('\n== verifier client (bench/verifier-bench.ts)')
  const verifierTable = run('verifier-bench.ts').trim()
  const verifierMd = [
    '## Verifier client: a Fastify backend guarded by @wristband/verifier, cache warm, beside the same backend unguarded',
    '',
    '```',
    verifierTable,
    '```',
    '',
  ].join('\n')
  console.log(verifierMd)
  return { partner, partnerMd: `${partnerMd}\n${manyMd}`, transferMany: many, verifierTable, verifierMd }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err instanceof Error ? err.message : err)
    void abort(1)
  },
)
