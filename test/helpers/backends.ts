import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe } from 'node:test'
import { Redis } from 'ioredis'
import pg from 'pg'
import { type DatabaseHandle, openDatabase } from '../../src/platform/db/database.js'

/**
 * The storage backends a storage-touching test runs against: always SQLite with in-process state;
 * PostgreSQL and Redis when TEST_DATABASE_URL / TEST_REDIS_URL are set. A backend that is configured
 * but unreachable fails the test instead of being skipped.
 */
export interface Backend {
  name: string
  /** Why this backend is skipped, or undefined when it runs. */
  skip?: string
  /** Environment for one isolated instance: its own SQLite file or PostgreSQL schema and Redis prefix. */
  provision(): Promise<ProvisionedBackend>
}

export interface ProvisionedBackend {
  env: Record<string, string>
  /** Removes the schema / key prefix / folder. */
  dispose(): Promise<void>
}

const dbUrl = process.env.TEST_DATABASE_URL
const redisUrl = process.env.TEST_REDIS_URL

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-test-'))
}

async function provisionRedis(env: Record<string, string>): Promise<() => Promise<void>> {
  if (!redisUrl) return async () => {}
  const prefix = `wbtest:${randomBytes(6).toString('hex')}:`
  const client = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 })
  await client.connect() // throws when configured but unreachable
  env.REDIS_URL = redisUrl
  env.REDIS_PREFIX = prefix
  return async () => {
    let cursor = '0'
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
      if (keys.length) await client.del(...keys)
      cursor = next
    } while (cursor !== '0')
    client.disconnect()
  }
}

const sqlite: Backend = {
  name: 'sqlite+memory',
  async provision() {
    const dir = tempDir()
    return {
      env: { DATA_DIR: dir, DATABASE_URL: `sqlite:${path.join(dir, 'wristband.db')}` },
      dispose: async () => fs.rmSync(dir, { recursive: true, force: true }),
    }
  },
}

const postgres: Backend = {
  name: redisUrl ? 'postgres+redis' : 'postgres+memory',
  ...(dbUrl ? {} : { skip: 'TEST_DATABASE_URL is not set: PostgreSQL suite SKIPPED' }),
  async provision() {
    const dir = tempDir()
    const schema = `wbtest_${randomBytes(6).toString('hex')}`
    const env: Record<string, string> = { DATA_DIR: dir, DATABASE_URL: dbUrl!, DATABASE_SCHEMA: schema }
    const disposeRedis = await provisionRedis(env)
    return {
      env,
      async dispose() {
        const client = new pg.Client({ connectionString: dbUrl })
        await client.connect()
        await client.query(`drop schema if exists ${schema} cascade`)
        await client.end()
        await disposeRedis()
        fs.rmSync(dir, { recursive: true, force: true })
      },
    }
  },
}

/** SQLite with Redis state, so the Redis store is exercised on the embedded database too. */
const sqliteRedis: Backend = {
  name: 'sqlite+redis',
  ...(redisUrl ? {} : { skip: 'TEST_REDIS_URL is not set: Redis suite SKIPPED' }),
  async provision() {
    const base = await sqlite.provision()
    const disposeRedis = await provisionRedis(base.env)
    return {
      env: base.env,
      async dispose() {
        await disposeRedis()
        await base.dispose()
      },
    }
  },
}

export const backends: Backend[] = [sqlite, postgres, sqliteRedis]

/** The full matrix for storage contract tests; HTTP feature tests use `httpBackends` (no duplicate sqlite+redis). */
export const httpBackends: Backend[] = [sqlite, postgres]

/**
 * The backend matrix: declares a suite titled `title [backend]` once per backend of `list`. A skipped
 * backend shows up as skipped with its reason, never silently; `skip` skips the suite on every backend
 * for a reason of its own (a tool that is not installed). `body` sets up what the suite needs from its
 * backend; `forEachBackend` (app.ts) is this with one running instance per suite.
 */
export function eachBackend(
  list: Backend[],
  title: string,
  body: (backend: Backend) => void,
  skip?: string,
): void {
  for (const backend of list) {
    const reason = backend.skip ?? skip
    describe(`${title} [${backend.name}]`, reason ? { skip: reason } : {}, () => body(backend))
  }
}

/**
 * For a storage suite: provisions the backend and opens its database before the suite's tests (applying
 * the migrations unless `migrate` is false), closes and removes it after. The getters are valid inside
 * tests.
 */
export function useDatabase(
  backend: Backend,
  opts: { migrate?: boolean } = {},
): { handle: () => DatabaseHandle; env: () => Record<string, string> } {
  let provisioned: ProvisionedBackend | undefined
  let handle: DatabaseHandle | undefined
  before(async () => {
    provisioned = await backend.provision()
    const env = provisioned.env
    handle = await openDatabase(env.DATABASE_URL!, { schema: env.DATABASE_SCHEMA ?? 'public' })
    if (opts.migrate !== false) await handle.migrate()
  })
  after(async () => {
    await handle?.close()
    await provisioned?.dispose()
  })
  return { handle: () => handle!, env: () => provisioned!.env }
}
