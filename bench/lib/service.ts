import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import pg from 'pg'
import { createApiKey } from '../../src/api-keys/api-keys.store.js'
import { systemClock } from '../../src/platform/clock.js'
import { type Config, loadConfig, settings } from '../../src/platform/config.js'
import { type DatabaseHandle, openDatabase } from '../../src/platform/db/database.js'
import { applySeed } from '../../src/seed/seed.js'
import { PRODUCTION_ENV } from '../../test/helpers/app.js'
import { freePort } from '../../test/helpers/processes.js'
import { onAbort, type Pinned, spawnPinned, waitForHttp } from './processes.js'

export const BENCH_SECRET = 'bench-secret-bench-secret-bench-secret-0123'
export const BENCH_USER = { email: 'bench@example.com', password: 'bench-password-1' }

const repo = fileURLToPath(new URL('../../', import.meta.url))
/** The compiled program, as production runs it (`node bin/wristband.js serve`, see README). */
const bin = path.join(repo, 'bin/wristband.js')

/**
 * Compiles src/ into dist/ once per bench process, so the service under test is the program production
 * runs, not the TypeScript sources through tsx (whose per-closure `__name` helper alone cost 4 % of a
 * verify request in the lane's profile).
 */
const buildOnce = (() => {
  let done = false
  return () => {
    if (done) return
    execFileSync(
      process.execPath,
      [path.join(repo, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
      {
        cwd: repo,
        stdio: 'inherit',
      },
    )
    done = true
  }
})()

export interface Store {
  /** `state/database`, e.g. `memory/sqlite`. */
  name: string
  state: 'memory' | 'redis'
  database: 'sqlite' | 'postgres'
}

export const STORES: Store[] = [
  { name: 'memory/sqlite', state: 'memory', database: 'sqlite' },
  { name: 'redis/sqlite', state: 'redis', database: 'sqlite' },
  { name: 'memory/postgres', state: 'memory', database: 'postgres' },
  { name: 'redis/postgres', state: 'redis', database: 'postgres' },
]

export interface Backends {
  databaseUrl?: string
  redisUrl?: string
}

/** Why PostgreSQL is unusable, or undefined when it answers. */
export async function checkPostgres(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 })
  try {
    await client.connect()
    await client.query('select 1')
    return undefined
  } catch (err) {
    return (err as Error).message
  } finally {
    await client.end().catch(() => {})
  }
}

export async function checkRedis(url: string): Promise<string | undefined> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  client.on('error', () => {})
  try {
    await client.connect()
    await client.ping()
    return undefined
  } catch (err) {
    return (err as Error).message
  } finally {
    client.disconnect()
  }
}

/** Settings of the service: the machine's own environment minus every wristband setting, plus ours. */
function serviceEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const name of Object.keys(settings)) delete env[name]
  return { ...env, ...extra }
}

let loginAddress = 0
/** Addresses for the bench's own set-up calls, apart from the 10.x.y.z range of the load. */
function setupAddress(): string {
  loginAddress++
  return `172.16.${(loginAddress >> 8) & 255}.${loginAddress & 255}`
}

export interface Service {
  origin: string
  /** Process id of `wristband serve` (the primary when it runs workers). */
  pid: number
  /** CPU seconds the service process has used so far. */
  cpu(): number
  store: Store
  apiKey: string
  /** A verify credential (an API key with scope tokens:verify), sent as `api_key` with verify calls. */
  verifyCredential: string
  login(): Promise<{ access_token: string; refresh_token: string }>
  post(
    path: string,
    body: unknown,
    address?: string,
  ): Promise<{ status: number; body: string; headers: Record<string, string> }>
  /** Stops the process and removes its data folder, schema and Redis keys. */
  dispose(): Promise<void>
}

export interface StartOptions {
  backends: Backends
  logLevel?: string
  /** Folder for `--cpu-prof` output; no profiling when absent. */
  profileDir?: string
  /** More settings of the service (e.g. METRICS_PORT, LOG_LEVEL). */
  env?: Record<string, string>
  /** Arguments after `serve`, e.g. `['--workers', '2']`. */
  serveArgs?: string[]
  /** CPU list for taskset; 0 (pinned to CPU 0) unless given, `0,1` lets it use both. */
  cpu?: number | string
  /** Options for node itself, before the script (e.g. `--inspect=127.0.0.1:9229`). */
  nodeArgs?: string[]
  /** Fills the migrated, seeded database before the service starts (bench:scale loads its data here). */
  prepare?: (db: DatabaseHandle, config: Config) => Promise<void>
}

/**
 * Provisions an isolated instance of the real service on `store` (own data folder, PostgreSQL schema
 * and Redis prefix), seeds it, and runs `wristband serve` pinned to CPU 0.
 */
export async function startService(store: Store, opts: StartOptions): Promise<Service> {
  const id = randomBytes(5).toString('hex')
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-bench-'))
  const port = await freePort()
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    PORT: String(port),
    // Production as the service refuses to start without it: a signing key, mail and SMS as files.
    ...PRODUCTION_ENV,
    JWT_SECRET: BENCH_SECRET,
    DATA_DIR: dataDir,
    // The credentialed verify row sends one credential from every address: its budget is not what is
    // measured (the anonymous rows spread over 65,536 addresses for the same reason).
    VERIFY_CLIENT_RATE_LIMIT: '100000000',
  }
  if (opts.logLevel) env.LOG_LEVEL = opts.logLevel
  Object.assign(env, opts.env)
  const schema = `wbbench_${id}`
  const prefix = `wbbench:${id}:`
  if (store.database === 'postgres') {
    env.DATABASE_URL = opts.backends.databaseUrl!
    env.DATABASE_SCHEMA = schema
    // Production refuses to start without DATABASE_URL (it would be a new, empty SQLite file): named here.
  } else env.DATABASE_URL = `sqlite:${path.join(dataDir, 'wristband.db')}`
  if (store.state === 'redis') {
    env.REDIS_URL = opts.backends.redisUrl!
    env.REDIS_PREFIX = prefix
  }

  let proc: Pinned | undefined
  const removeStorage = async () => {
    if (store.database === 'postgres') {
      const client = new pg.Client({ connectionString: opts.backends.databaseUrl })
      await client.connect()
      await client.query(`drop schema if exists ${schema} cascade`)
      await client.end()
    }
    if (store.state === 'redis') {
      const client = new Redis(opts.backends.redisUrl!, { maxRetriesPerRequest: 1 })
      let cursor = '0'
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
        if (keys.length) await client.del(...keys)
        cursor = next
      } while (cursor !== '0')
      client.disconnect()
    }
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
  const unregister = onAbort(removeStorage)
  const dispose = async () => {
    await proc?.stop()
    unregister()
    await removeStorage()
  }

  try {
    const config = loadConfig(env)
    const handle = await openDatabase(config.databaseUrl, { schema: config.DATABASE_SCHEMA })
    let apiKey: string
    let verifyCredential: string
    try {
      await handle.migrate()
      await applySeed(handle.db, systemClock, {
        events: [{ id: 1, uid: 'bench-fest', name: 'Bench Fest' }],
        administrators: [{ ...BENCH_USER, role: 'superadmin', event_ids: [] }],
      })
      const key = await createApiKey(handle.db, {
        event_id: 1,
        name: 'bench',
        scopes: ['tickets:read'],
        created_by: null,
        now: systemClock.now(),
      })
      apiKey = key.plaintext
      verifyCredential = (
        await createApiKey(handle.db, {
          event_id: 1,
          name: 'bench backend',
          scopes: ['tokens:verify'],
          created_by: null,
          now: systemClock.now(),
        })
      ).plaintext
      await opts.prepare?.(handle, config)
    } finally {
      await handle.close()
    }

    buildOnce()
    const args = [bin, 'serve', ...(opts.serveArgs ?? [])]
    if (opts.profileDir) args.unshift('--cpu-prof', `--cpu-prof-dir=${opts.profileDir}`)
    if (opts.nodeArgs) args.unshift(...opts.nodeArgs)
    // The data folder is the working directory, so a .env of the checkout is never picked up.
    proc = spawnPinned(opts.cpu ?? 0, args, serviceEnv(env), dataDir)
    const origin = `http://127.0.0.1:${port}`
    await waitForHttp(`${origin}/health`, proc)

    const post = async (p: string, body: unknown, address = setupAddress()) => {
      const res = await fetch(`${origin}${p}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': address },
        body: JSON.stringify(body),
      })
      return { status: res.status, body: await res.text(), headers: Object.fromEntries(res.headers) }
    }
    const running = proc
    return {
      origin,
      pid: running.child.pid!,
      cpu: () => running.cpu(),
      store,
      apiKey,
      verifyCredential,
      post,
      async login() {
        const res = await post('/auth/login', { ...BENCH_USER, role: 'admin' })
        if (res.status !== 200) throw new Error(`bench login failed: ${res.status} ${res.body}`)
        return JSON.parse(res.body) as { access_token: string; refresh_token: string }
      },
      dispose,
    }
  } catch (err) {
    await dispose().catch(() => {})
    throw err
  }
}

export interface Server {
  origin: string
  cpu(): number
  stop(): Promise<void>
}

/**
 * A yardstick answering `answer` to every request, pinned to CPU 0 like the service: `baseline`
 * (bare node:http), `fastify` (the framework with its defaults) or `read-body` (node:http reading and
 * parsing the body as the verify lane does, answering with `headers`, the service's own header set).
 */
export async function startReference(
  kind: 'baseline' | 'fastify' | 'read-body',
  answer: string,
  headers: Record<string, string> = {},
): Promise<Server> {
  const port = await freePort()
  const file = fileURLToPath(new URL(`../${kind}-server.ts`, import.meta.url))
  const proc = spawnPinned(
    0,
    ['--import', import.meta.resolve('tsx'), file],
    { ...process.env, PORT: String(port), BASELINE_BODY: answer, BASELINE_HEADERS: JSON.stringify(headers) },
    repo,
  )
  const origin = `http://127.0.0.1:${port}`
  await waitForHttp(`${origin}/`, proc)
  return { origin, cpu: () => proc.cpu(), stop: () => proc.stop() }
}
