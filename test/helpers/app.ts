import assert from 'node:assert/strict'
import { generateKeyPairSync } from 'node:crypto'
import { Writable } from 'node:stream'
import { after, before } from 'node:test'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { type AppDependencies, buildApp } from '../../src/app.js'
import { type Config, loadConfig } from '../../src/platform/config.js'
import { type DatabaseHandle, openDatabase } from '../../src/platform/db/database.js'
import { applySeed, type SeedDocument } from '../../src/seed/seed.js'
import { type Backend, eachBackend, type ProvisionedBackend } from './backends.js'
import { TestClock } from './clock.js'

export const TEST_SECRET = 'test-secret-that-is-at-least-32-bytes-long!'

/**
 * What a production start needs besides JWT_SECRET: an edge key, and mail and SMS as files (explicitly,
 * since production refuses the outbox otherwise).
 */
export const PRODUCTION_ENV: Readonly<Record<string, string>> = {
  NODE_ENV: 'production',
  EDGE_SIGNING_KEY: generateKeyPairSync('ed25519')
    .privateKey.export({ format: 'pem', type: 'pkcs8' })
    .toString(),
  MAIL_TRANSPORT: 'outbox',
}

/** One running instance of the service on a provisioned backend, plus what tests need around it. */
export interface TestApp {
  app: FastifyInstance
  config: Config
  clock: TestClock
  /** A second connection to the same database, for seeding and for checking what was stored. */
  db: DatabaseHandle
  /** Every log line the instance wrote, as text. */
  logs: string[]
  seed(doc: SeedDocument): Promise<SeedDocument>
  /** `app.inject` with a JSON body and a fresh client address, so rate limits don't leak between tests. */
  request(opts: InjectOptions & { token?: string }): Promise<LightMyRequestResponse>
  close(): Promise<void>
}

let addressCounter = 0
/** A distinct client address per call (10.x.y.z), used as X-Forwarded-For. */
export function nextAddress(): string {
  addressCounter++
  return `10.${(addressCounter >> 16) & 255}.${(addressCounter >> 8) & 255}.${addressCounter & 255}`
}

/** Dependencies a test may inject besides the clock and log stream, which startApp provides. */
export type TestDependencies = Omit<AppDependencies, 'clock' | 'logStream'>

export async function startApp(
  backend: Backend,
  env: Record<string, string> = {},
  provisioned?: ProvisionedBackend,
  deps: TestDependencies = {},
): Promise<TestApp> {
  const p = provisioned ?? (await backend.provision())
  const config = loadConfig({
    JWT_SECRET: TEST_SECRET,
    LOG_LEVEL: 'info',
    NODE_ENV: 'test',
    // Exact per-request counting in Redis, windows from an address's first request, as in process. The
    // synced default aligns windows to the clock (floor(now / window)), so a test that counts up to a
    // limit would fail whenever its burst crossed a minute boundary; the synced mode has its own tests
    // (src/platform/rate-limit.test.ts and the Redis outage test set it).
    RATE_LIMIT_SYNC_MS: '0',
    ...p.env,
    ...env,
  })
  const clock = new TestClock()
  const logs: string[] = []
  const logStream = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk))
      cb()
    },
  })
  let app: FastifyInstance
  try {
    app = await buildApp(config, { ...deps, clock, logStream })
    await app.ready()
  } catch (err) {
    // A failed start must not leave the backend's connections open, or the test process never exits.
    if (!provisioned) await p.dispose()
    throw err
  }
  const db = await openDatabase(config.databaseUrl, { schema: config.DATABASE_SCHEMA })
  return {
    app,
    config,
    clock,
    db,
    logs,
    seed: (doc) => applySeed(db.db, clock, doc),
    request({ token, headers, ...opts }) {
      return app.inject({
        ...opts,
        headers: {
          'x-forwarded-for': nextAddress(),
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...headers,
        },
      })
    },
    async close() {
      await app.close()
      await db.close()
      if (!provisioned) await p.dispose()
    },
  }
}

/**
 * Declares a suite once per backend (`eachBackend`: skipped backends show up as skipped with their
 * reason, never silently). `body` gets a fresh instance shared by the suite's tests.
 */
export function forEachBackend(
  list: Backend[],
  title: string,
  body: (ctx: () => TestApp) => void,
  env: Record<string, string> = {},
  deps?: () => TestDependencies,
): void {
  eachBackend(list, title, (backend) => {
    let t: TestApp | undefined
    before(async () => {
      t = await startApp(backend, env, undefined, deps?.())
    })
    after(async () => {
      await t?.close()
    })
    body(() => {
      if (!t) throw new Error('test app not started')
      return t
    })
  })
}

/**
 * Two instances on the same storage, a fleet of two: `body` runs with both, which are closed after it.
 * The storage is `provisioned` when given (its owner disposes of it), else provisioned and disposed of here.
 */
export async function withTwoInstances(
  backend: Backend,
  env: Record<string, string>,
  body: (a: TestApp, b: TestApp) => Promise<void>,
  provisioned?: ProvisionedBackend,
): Promise<void> {
  const p = provisioned ?? (await backend.provision())
  try {
    const a = await startApp(backend, env, p)
    let b: TestApp | undefined
    try {
      b = await startApp(backend, env, p)
      await body(a, b)
    } finally {
      await a.close()
      await b?.close()
    }
  } finally {
    if (!provisioned) await p.dispose()
  }
}

export const STANDARD_SEED: SeedDocument = {
  events: [
    { id: 1, uid: 'summer-fest-2026', name: 'Summer Fest', timezone: 'Europe/Berlin' },
    { id: 2, uid: 'winter-fest-2026', name: 'Winter Fest', timezone: 'UTC' },
  ],
  administrators: [
    { email: 'root@example.com', password: 's3cret-pass', role: 'superadmin', event_ids: [] },
    { email: 'ev1@example.com', password: 's3cret-pass', role: 'admin', event_ids: [1] },
  ],
  network_managers: [{ email: 'nm@example.com', password: 's3cret-pass', event_ids: [1] }],
  operators: [
    {
      email: 'op@example.com',
      password: 's3cret-pass',
      event_id: 1,
      mode: 0,
      permissions: { '1': ['pos:sell', 'ticket:scan'] },
    },
    { email: 'op2@example.com', password: 's3cret-pass', event_id: 2, mode: 0, permissions: null },
  ],
  customers: [{ phone: '+4915100000001', password: 's3cret-pass', email: 'holder@example.com' }],
  devices: [{ dev_mac: 'AA:BB:CC:DD:EE:01', event_id: 1, operator_email: 'op@example.com', archived: false }],
  dashboard_users: [{ username: 'partner1', password: 's3cret-pass', event_ids: [1] }],
}

/** A seed row for an administrator (role admin) of `eventIds`, with the standard test password. */
export function eventAdmin(
  email: string,
  eventIds: number[] = [1],
): NonNullable<SeedDocument['administrators']>[number] {
  return { email, password: 's3cret-pass', role: 'admin', event_ids: eventIds }
}

/** STANDARD_SEED with the rows of `extra` added after the standard ones, list by list. */
export function withStandardSeed(extra: SeedDocument): SeedDocument {
  const doc: SeedDocument = { ...STANDARD_SEED }
  for (const key of Object.keys(extra) as (keyof SeedDocument)[]) appendRows(doc, key, extra[key])
  return doc
}

function appendRows<K extends keyof SeedDocument>(doc: SeedDocument, key: K, rows: SeedDocument[K]): void {
  doc[key] = [...(STANDARD_SEED[key] ?? []), ...(rows ?? [])] as SeedDocument[K]
}

/** Signs in through HTTP and returns the token pair. */
export async function login(
  t: TestApp,
  email: string,
  role: 'admin' | 'operator' | 'network_manager' = 'admin',
  password = 's3cret-pass',
): Promise<{ access_token: string; refresh_token: string }> {
  const res = await t.request({ method: 'POST', url: '/auth/login', payload: { email, password, role } })
  if (res.statusCode !== 200) throw new Error(`login of ${email} failed: ${res.statusCode} ${res.body}`)
  return res.json()
}

/**
 * POST /tokens/verify: the answer's body (`{ valid, claims }`, claims as the token type has them), after
 * checking that the service answered 200 (it does for any token, valid or not).
 */
export async function verifyToken(t: TestApp, token: string) {
  const res = await t.request({ method: 'POST', url: '/tokens/verify', payload: { token } })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

/** POST /auth/logout: signs out with `bearer` (an access token, or none) and revokes `refreshToken`. */
export function logout(
  t: TestApp,
  bearer: string | undefined,
  refreshToken: string,
): Promise<LightMyRequestResponse> {
  return t.request({
    method: 'POST',
    url: '/auth/logout',
    token: bearer,
    payload: { refresh_token: refreshToken },
  })
}

/**
 * An API key of event 1 created and revoked through HTTP by its administrator: a credential on the
 * revocation list (refresh tokens are refused through their rows and never are). Returns the key.
 */
export async function revokedApiKey(t: TestApp): Promise<string> {
  const { key, revoke } = await apiKeyOf(t)
  await revoke()
  return key
}

/**
 * An API key of event 1 created through HTTP by its administrator on `t`; `revoke(on)` revokes it
 * through HTTP on `on` (another instance of the fleet) or `t`.
 */
export async function apiKeyOf(t: TestApp): Promise<{ key: string; revoke(on?: TestApp): Promise<void> }> {
  const admin = (await login(t, 'ev1@example.com')).access_token
  const created = await t.request({
    method: 'POST',
    url: '/tokens/api-key',
    token: admin,
    payload: { event_id: 1, name: `key-${nextAddress()}`, scopes: ['api:read'] },
  })
  assert.equal(created.statusCode, 200, created.body)
  const { id, api_key } = created.json()
  return {
    key: api_key,
    async revoke(on = t) {
      const revoked = await on.request({ method: 'DELETE', url: `/tokens/api-key/${id}`, token: admin })
      assert.equal(revoked.statusCode, 200, revoked.body)
    },
  }
}
