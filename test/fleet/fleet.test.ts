// The fleet test: HAProxy (deploy/haproxy.cfg, as shipped) on loopback in front of two instances on
// PostgreSQL and a Redis of their own, with /ready as its health check. Each instance in turn gets
// SIGTERM and is started again, and then Redis is killed and started again, under a steady bounded
// load of verify, login and partner requests, and not one request may fail. Run with `npm run test:fleet` (and by `npm test`); skipped with a note when
// haproxy, PostgreSQL or Redis is missing.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { createApiKey } from '../../src/api-keys/api-keys.store.js'
import { systemClock } from '../../src/platform/clock.js'
import { openDatabase } from '../../src/platform/db/database.js'
import { applySeed } from '../../src/seed/seed.js'
import { STANDARD_SEED, TEST_SECRET } from '../helpers/app.js'
import { httpBackends, type ProvisionedBackend } from '../helpers/backends.js'
import { freePort, killProcess, redisServerInstalled, startRedisServer } from '../helpers/processes.js'
import { sample } from '../helpers/scrape.js'
import { ServiceProcess } from '../helpers/service.js'
import { until } from '../helpers/until.js'

const CONFIG = fileURLToPath(new URL('../../deploy/haproxy.cfg', import.meta.url))
const haproxyInstalled = spawnSync('haproxy', ['-v']).status === 0
const skip = !haproxyInstalled
  ? 'haproxy is not installed (apt-get install haproxy): fleet test SKIPPED'
  : !process.env.TEST_DATABASE_URL || !process.env.TEST_REDIS_URL
    ? 'TEST_DATABASE_URL and TEST_REDIS_URL are not both set: fleet test SKIPPED'
    : !redisServerInstalled
      ? 'redis-server is not installed (the fleet kills a Redis of its own): fleet test SKIPPED'
      : undefined
if (skip) console.log(`!! ${skip}`)

const METRICS_TOKEN = 'fleet-scrape-token-0123456789'

/** Concurrent clients of the load, each waiting a little between requests: a steady, bounded load. */
const CLIENTS = 4
const PAUSE_MS = 20

type Kind = 'verify' | 'login' | 'partner'

class Load {
  readonly sent: Record<Kind, number> = { verify: 0, login: 0, partner: 0 }
  readonly failures: string[] = []
  private stopped = false
  private running: Promise<void>[] = []
  private address = 0

  constructor(
    private readonly origin: string,
    private readonly token: string,
    private readonly apiKey: string,
  ) {}

  start(): void {
    this.running = Array.from({ length: CLIENTS }, (_, i) => this.client(i))
  }

  async stop(): Promise<void> {
    this.stopped = true
    await Promise.all(this.running)
  }

  get total(): number {
    return this.sent.verify + this.sent.login + this.sent.partner
  }

  private async client(n: number): Promise<void> {
    // Mostly verify, as in production; a login now and then (argon2 is the costly one).
    const plan: Kind[] = ['verify', 'partner', 'verify', 'verify', 'partner', 'verify', 'verify', 'login']
    for (let i = n; !this.stopped; i++) {
      await this.one(plan[i % plan.length]!)
      await sleep(PAUSE_MS)
    }
  }

  private async one(kind: Kind): Promise<void> {
    // Each request comes "from" its own client address, so the per-address rate limits stay out of it.
    this.address++
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'x-forwarded-for': `10.${(this.address >> 16) & 255}.${(this.address >> 8) & 255}.${this.address & 255}`,
    }
    const request: RequestInit =
      kind === 'verify'
        ? { method: 'POST', headers, body: JSON.stringify({ token: this.token }) }
        : kind === 'login'
          ? {
              method: 'POST',
              headers,
              body: JSON.stringify({ email: 'root@example.com', password: 's3cret-pass', role: 'admin' }),
            }
          : { method: 'GET', headers: { ...headers, api_key: this.apiKey } }
    const path =
      kind === 'verify' ? '/tokens/verify' : kind === 'login' ? '/auth/login' : '/companies/tickets'
    this.sent[kind]++
    try {
      const res = await fetch(`${this.origin}${path}`, request)
      const body = await res.text()
      if (res.status !== 200) this.failures.push(`${kind}: ${res.status} ${body.slice(0, 200)}`)
      else if (kind === 'verify' && !JSON.parse(body).valid)
        this.failures.push(`verify: ${body.slice(0, 200)}`)
    } catch (err) {
      this.failures.push(
        `${kind}: ${(err as Error).message} ${String((err as { cause?: unknown }).cause ?? '')}`,
      )
    }
  }
}

describe('fleet: rolling restart behind HAProxy', skip ? { skip } : {}, () => {
  let p: ProvisionedBackend
  let instances: ServiceProcess[] = []
  let haproxy: ChildProcess | undefined
  let haproxyOutput = ''
  let origin = ''
  let stats = ''
  let redis: ChildProcess | undefined
  let redisPort = 0

  /**
   * The state HAProxy gives each instance (UP, DOWN, ...) in a backend, from its CSV statistics:
   * `wristband` (checked on /ready) or `wristband_verify` (the verify lane, checked on /ready/verify).
   */
  async function serverStates(backend = 'wristband'): Promise<Record<string, string>> {
    const csv = await (await fetch(`${stats}/stats;csv`)).text()
    const [head, ...rows] = csv.replace(/^# /, '').trim().split('\n')
    const cols = head!.split(',')
    const out: Record<string, string> = {}
    for (const row of rows) {
      const f = row.split(',')
      if (f[cols.indexOf('pxname')] === backend && /^app\d$/.test(f[cols.indexOf('svname')]!))
        out[f[cols.indexOf('svname')]!] = f[cols.indexOf('status')]!
    }
    return out
  }
  const BACKENDS = ['wristband', 'wristband_verify']
  const upInHaproxy = (name: string) =>
    until(
      `HAProxy to see ${name} UP in both backends`,
      async () => {
        for (const backend of BACKENDS) if ((await serverStates(backend))[name] !== 'UP') return false
        return true
      },
      60_000,
    )

  before(async () => {
    const postgres = httpBackends.find((b) => b.name.startsWith('postgres'))!
    p = await postgres.provision()
    const handle = await openDatabase(p.env.DATABASE_URL!, { schema: p.env.DATABASE_SCHEMA! })
    await handle.migrate()
    await applySeed(handle.db, systemClock, STANDARD_SEED)
    await handle.close()
    const ports = await Promise.all([freePort(), freePort(), freePort(), freePort()])
    // A Redis of the fleet's own, which the second test kills (the shared one serves other suites).
    redisPort = await freePort()
    redis = await startRedisServer(redisPort)
    const env = {
      ...p.env,
      REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      METRICS_TOKEN,
      JWT_SECRET: TEST_SECRET,
      LOG_LEVEL: 'warn',
      // HAProxy is the only peer: the client address is the one it forwards.
      TRUST_PROXY: '127.0.0.1',
      // Above the default: HAProxy's two failed checks must fall inside it even on a busy test machine.
      SHUTDOWN_DRAIN_SECONDS: '10',
    }
    instances = [
      new ServiceProcess(ports[0]!, env, p.env.DATA_DIR!),
      new ServiceProcess(ports[1]!, env, p.env.DATA_DIR!),
    ]
    await Promise.all(instances.map((i) => i.start()))
    origin = `http://127.0.0.1:${ports[2]}`
    stats = `http://127.0.0.1:${ports[3]}`
    haproxy = spawn('haproxy', ['-f', CONFIG, '-db'], {
      env: {
        PATH: process.env.PATH ?? '',
        WB_LISTEN: `127.0.0.1:${ports[2]}`,
        WB_STATS: `127.0.0.1:${ports[3]}`,
        WB_APP1: `127.0.0.1:${ports[0]}`,
        WB_APP2: `127.0.0.1:${ports[1]}`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const keep = (d: Buffer) => {
      haproxyOutput = (haproxyOutput + d).slice(-20_000)
    }
    haproxy.stdout!.on('data', keep)
    haproxy.stderr!.on('data', keep)
    await until(
      'HAProxy to answer',
      async () => {
        if (haproxy!.exitCode !== null) throw new Error(`haproxy exited: ${haproxyOutput}`)
        try {
          await serverStates()
          return true
        } catch {
          return false
        }
      },
      30_000,
    )
    await upInHaproxy('app1')
    await upInHaproxy('app2')
  })

  after(async () => {
    await Promise.all(instances.map((i) => i.stop()))
    if (haproxy) await killProcess(haproxy)
    if (redis) await killProcess(redis)
    await p?.dispose()
  })

  /** How many /ready requests an instance answered (HAProxy's health checks). */
  async function readyChecks(i: ServiceProcess): Promise<number> {
    const res = await fetch(`${i.origin}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
    return sample(await res.text(), 'wristband_http_request_duration_seconds_count', { route: '/ready' })
  }

  /** An access token and a partner API key for the load. */
  async function credentials(): Promise<{ token: string; apiKey: string }> {
    const login = await fetch(`${origin}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': '10.255.0.1' },
      body: JSON.stringify({ email: 'root@example.com', password: 's3cret-pass', role: 'admin' }),
    })
    assert.equal(login.status, 200)
    const { access_token } = (await login.json()) as { access_token: string }
    const handle = await openDatabase(p.env.DATABASE_URL!, { schema: p.env.DATABASE_SCHEMA! })
    const { plaintext } = await createApiKey(handle.db, {
      event_id: 1,
      name: 'fleet',
      scopes: ['api:read'],
      created_by: null,
      now: Date.now(),
    })
    await handle.close()
    return { token: access_token, apiKey: plaintext }
  }

  test('a rolling restart of each instance under load: zero failed requests', {
    timeout: 300_000,
  }, async () => {
    const { token, apiKey } = await credentials()
    const load = new Load(origin, token, apiKey)
    load.start()
    try {
      for (const [i, instance] of instances.entries()) {
        const name = `app${i + 1}`
        const before = load.total
        assert.equal(await instance.stop(), 0, instance.output)
        await instance.start()
        await upInHaproxy(name)
        assert.ok(load.total > before, `requests went on while ${name} restarted`)
      }
    } finally {
      await load.stop()
    }
    console.log(`fleet: ${load.total} requests during the rolling restart: ${JSON.stringify(load.sent)}`)
    assert.deepEqual(load.failures, [], haproxyOutput)
    for (const kind of ['verify', 'login', 'partner'] as const) assert.ok(load.sent[kind] > 0, kind)
  })

  test('Redis killed under load: both instances stay in the balancer, zero failed requests', {
    timeout: 300_000,
  }, async () => {
    const { token, apiKey } = await credentials()
    const load = new Load(origin, token, apiKey)
    const ready = async (i: ServiceProcess) =>
      (await (await fetch(`${i.origin}/ready`)).json()) as { status: string }
    load.start()
    try {
      await killProcess(redis!)
      redis = undefined
      for (const i of instances)
        await until(`${i.origin} to say degraded`, async () => (await ready(i)).status === 'degraded', 30_000)
      // HAProxy checked each instance more often than its `fall 2` while Redis was down, and still
      // sends to both.
      const checks = await Promise.all(instances.map(readyChecks))
      const from = load.total
      for (const [n, i] of instances.entries())
        await until(
          `HAProxy to check ${i.origin} 3 more times`,
          async () => (await readyChecks(i)) >= checks[n]! + 3,
          60_000,
        )
      assert.ok(load.total > from, 'requests went on without Redis')
      for (const backend of BACKENDS)
        assert.deepEqual(await serverStates(backend), { app1: 'UP', app2: 'UP' })
      redis = await startRedisServer(redisPort)
      for (const i of instances)
        await until(`${i.origin} to say ready`, async () => (await ready(i)).status === 'ready', 30_000)
    } finally {
      await load.stop()
    }
    console.log(`fleet: ${load.total} requests while Redis was killed: ${JSON.stringify(load.sent)}`)
    assert.deepEqual(load.failures, [], haproxyOutput)
    for (const kind of ['verify', 'login', 'partner'] as const) assert.ok(load.sent[kind] > 0, kind)
  })
})
