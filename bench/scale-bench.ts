// npm run bench:scale — data at festival scale: the same measures on a small and a large copy
// of the data, side by side, with the growth factor.
//
// Each copy is its own PostgreSQL schema, loaded with generate_series in the shapes the service writes
// (the statistics counters are filled by the service's own triggers as the rows go in):
//   one event of N tickets (three ticket types, a third claimed, 40 % used over the last day at four
//   gates), N/2 holder links, N consumers, N refresh tokens (families of five: four rotated, one live,
//   what N refreshes leave), N/5 audit rows, N/10 webhook deliveries with an attempt each (1 % pending,
//   5 % failed), and a
//   10,000-ticket event beside the big one.
// Both copies are served at once by the real service (`wristband serve`, pinned to CPU 0, the bench on
// CPU 1), and every measure alternates between them sample by sample, so that what else the shared
// machine does falls on both alike. Measures:
//   stats: GET /events/1/stats (the dashboard's poll) p50 / p95, and of the 10,000-ticket event;
//   the dashboard's event list (its figures query); /metrics (the pending deliveries count);
//   ticket use p50 / p95 idle, and while 8 dashboards poll the stats back to back (and its 503s);
//   the audit page filtered by kind, outcome and actor, a partner's deliveries by status (store functions);
//   RSS of the process after start (what N refreshes cost in memory);
//   start-up with N live revocations: to /ready and to /ready/verify (the list loaded), in
//   process and with Redis and 2 workers (a second `serve` on the copy, best of two), and the RSS of
//   the in-process one once loaded (what the list costs per million);
//   retention: a pass over the large tables with nothing due (the cost of looking; best of three), then every row
//   due (the clock a year and more ahead): passes until done, total time and the longest batch (the
//   longest a batch's delete holds its rows' locks). This empties the copy, so it comes last.
//   sync (its own table): the scanners' first sync. One scanner's cold first sync in the compact form
//   (`format=columns`, brotli, a new snapshot: the feed moved more than a page) to its last page and the
//   delta after it, its bytes on the wire and pages; the service's RSS before it (after a first sync of
//   the 10,000-ticket event beside it, so that the code paths are warm), its peak during it and what
//   the service keeps 3 s after it; the object form's first sync (every page, or its 413 above
//   SCAN_SYNC_JSON_MAX_TICKETS); and ticket use at a gate's pace (one every 5 ms) quiet and while four
//   scanners do a cold first sync at once (on a worker thread: other devices, off the event loop that
//   times the uses; uncompressed: their decoding would take the bench's CPU), in rounds (a quiet spell
//   as long in uses as the last round's, then the four scanners) until 100 uses of each were timed
//   (SCALE_SYNC_USES), at least three rounds, and as many quiet uses as during them.
// Sections (SCALE_SECTIONS, comma-separated, default `serve,startup,retention`): `serve` (stats, event
// list, metrics, ticket use, RSS), `startup`, `retention`, `sync`. A section left out prints '-'. With
// `sync` the services may use both CPUs (a snapshot is built on a worker thread beside the requests).
// SCALE_DATABASE=sqlite (`sync` alone): the copies are SQLite files holding the tickets only (written as
// the ledger holds them, 40 % then marked used), served the same way; it needs neither PostgreSQL nor
// Redis. Writes bench/results/scale-sync-<database>.md and .json for `sync` alone.
// N is SCALE_LARGE (1,000,000) and SCALE_SMALL (10,000). Needs PostgreSQL (BENCH_DATABASE_URL, default
// postgres://postgres@127.0.0.1:5432/test) and Redis (BENCH_REDIS_URL, default redis://127.0.0.1:6379).
// Writes bench/results/scale.md and .json (SCALE_RESULTS=0: print only, as the CI test does).
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import { Redis } from 'ioredis'
import { sql } from 'kysely'
import { pageAuditEntries } from '../src/audit/audit.store.js'
import { eventListFigures } from '../src/dashboard/stats.store.js'
import { BASELINE_SCOPES } from '../src/identities/grants.js'
import { systemClock } from '../src/platform/clock.js'
import type { DatabaseHandle } from '../src/platform/db/database.js'
import { openDatabase } from '../src/platform/db/database.js'
import { type Drain, pruneOnce } from '../src/retention/retention.js'
import { applySeed } from '../src/seed/seed.js'
import { JwtCodec } from '../src/tokens/jwt.js'
import { listDeliveries } from '../src/webhooks/webhooks.store.js'
import { PRODUCTION_ENV } from '../test/helpers/app.js'
import { fillLedger } from '../test/helpers/ledger.js'
import { freePort } from '../test/helpers/processes.js'
import { guardRun, hasCommand, pinSelf, rssBytes, spawnPinned, waitForHttp } from './lib/processes.js'
import { f0, f1, machineLine, table } from './lib/report.js'
import {
  type FirstSyncJob,
  rawGet,
  type ScanTarget,
  compactFirstSync as syncCompact,
} from './lib/scan-client.js'
import { BENCH_SECRET, checkPostgres, checkRedis, type Service, startService } from './lib/service.js'

const LARGE = Number(process.env.SCALE_LARGE ?? 1_000_000)
const SMALL = Number(process.env.SCALE_SMALL ?? 10_000)
const SIDE_EVENT = Math.min(10_000, SMALL)
const SAMPLES = Number(process.env.SCALE_SAMPLES ?? 60)
/**
 * Samples of each filter of the audit and delivery pages: a filter's page takes about a millisecond,
 * where the p95 of 60 samples moved 0.6–2.2× between runs of the same code on a shared machine.
 */
const FILTER_SAMPLES = Math.max(SAMPLES, 400)
const databaseUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
const METRICS_TOKEN = 'bench-metrics-token-0123456789'
const OPERATOR = { email: 'gate@example.com', password: 'bench-password-1' }
const HOUR = 3_600_000
const DAY = 24 * HOUR
const SECTIONS = new Set(
  (process.env.SCALE_SECTIONS ?? 'serve,startup,retention').split(',').map((x) => x.trim()),
)
for (const x of SECTIONS)
  if (!['serve', 'startup', 'retention', 'sync'].includes(x))
    throw new Error(`SCALE_SECTIONS: unknown section ${x}`)
/** Only the first sync is measured: the copies need only their tickets. */
const SYNC_ONLY = [...SECTIONS].every((x) => x === 'sync')
const DATABASE = (process.env.SCALE_DATABASE ?? 'postgres') as 'postgres' | 'sqlite'
if (DATABASE !== 'postgres' && DATABASE !== 'sqlite') throw new Error(`SCALE_DATABASE: ${DATABASE}`)
if (DATABASE === 'sqlite' && !SYNC_ONLY)
  throw new Error(
    "SCALE_DATABASE=sqlite measures the sync section alone (the others load with PostgreSQL's generate_series)",
  )
/**
 * Retention's all-due drain runs while another transaction holds a snapshot (a pg_dump, a long report, a
 * replica's feedback): PostgreSQL can then neither vacuum the deleted rows nor mark their index entries
 * dead, so whatever walks past them visits each.
 */
const RETENTION_SNAPSHOT = process.env.SCALE_RETENTION_SNAPSHOT === '1'
/** Ticket uses timed during the scanners' first syncs (at least; whole rounds). */
const SYNC_USES = Number(process.env.SCALE_SYNC_USES ?? 100)
/** A folder: each copy's service runs with `--cpu-prof` and writes its profile to `<folder>/<n>` (bench/profile.ts reads it). */
const PROFILE = process.env.SCALE_PROFILE
const USE_EVERY_MS = 5

guardRun('bench:scale', Number(process.env.SCALE_TIME_LIMIT_SECONDS ?? 3600))
if (hasCommand('taskset')) pinSelf(1)

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN
}

/**
 * A table's batch times through a drain: how many, the median of the first and of the last tenth (a
 * batch that costs more the more batches went before shows here), p99, the longest, the sum.
 */
const batchLine = (ms: number[]) => {
  const tenth = Math.max(1, Math.floor(ms.length / 10))
  const median = (xs: number[]) => percentile(xs, 50).toFixed(1)
  return (
    `${ms.length} batches, median ${median(ms.slice(0, tenth))} ms first tenth -> ${median(ms.slice(-tenth))} ms ` +
    `last, p99 ${percentile(ms, 99).toFixed(1)}, max ${Math.max(...ms).toFixed(1)}, sum ${f0(ms.reduce((a, b) => a + b, 0))} ms`
  )
}

/** What both loads start with: the side event and the gate's operator. */
const seedCopy = (db: DatabaseHandle['db']) =>
  applySeed(db, systemClock, {
    events: [{ id: 2, uid: 'side-fest', name: 'Side Fest' }],
    operators: [{ ...OPERATOR, event_id: 1, mode: 0, permissions: null }],
  })

/** Loads one copy of `n` tickets and the rest (see the head of this file) with generate_series. */
async function load(handle: DatabaseHandle, n: number) {
  const db = handle.db
  const now = Date.now()
  await seedCopy(db)
  const started = performance.now()
  const run = (q: string) => sql.raw(q).execute(db)
  for (const [event, count] of [
    [1, n],
    [2, SIDE_EVENT],
  ] as const) {
    await run(`insert into ticket_types (uid, event_id, name, price, ticket_date, created_at)
      select md5('type-${event}-' || g), ${event}, 'Type ' || g, 4990 * g, '2026-07-18T10:00:00.000', ${now}
      from generate_series(1, 3) g`)
    const [type] = (
      await sql<{ id: number }>`select min(id) as id from ticket_types where event_id = ${event}`.execute(db)
    ).rows
    await run(`insert into holder_links (event_id, email, claimed_at, created_at, updated_at)
      select ${event}, 'fan' || g || '-${event}@example.com',
        case when g % 3 = 0 then ${now - DAY} end, ${now - 2 * DAY}, ${now - 2 * DAY}
      from generate_series(1, ${Math.ceil(count / 2)}) g`)
    const [link] = (
      await sql<{ id: number }>`select min(id) as id from holder_links where event_id = ${event}`.execute(db)
    ).rows
    // A claim-link token per link, carrying its link's claim time (migration 040).
    await run(`insert into holder_link_tokens (token_hash, link_id, created_at, claimed_at)
      select md5('link-token-${event}-' || id), id, created_at, claimed_at from holder_links where event_id = ${event}`)
    // A third claimed (their links), 40 % used over the last day: the service's own columns and states.
    await run(`insert into transfers (uid, event_id, ticket_type_id, company_ticket_id, email, balance,
        promo_balance, access_gate, link_id, status, mailed_at, claimed_at, used_at, used_timestamp,
        used_gate, created_at, code_digest, feed_seq)
      select md5('ticket-${event}-' || g), ${event}, ${type!.id} + g % 3, 'ct-' || g,
        'fan' || ((g + 1) / 2) || '-${event}@example.com', (g % 50) * 100, (g % 7) * 100,
        (array['North', 'South', 'East', null])[1 + g % 4], ${link!.id} + (g - 1) / 2,
        case when g % 5 < 2 then 'USED' when ((g + 1) / 2) % 3 = 0 then 'CLAIMED' else 'TRANSFERRED' end,
        ${now - 2 * DAY}, case when ((g + 1) / 2) % 3 = 0 then ${now - DAY} end,
        case when g % 5 < 2 then ${now} - (g::bigint * 7919) % ${DAY} end,
        case when g % 5 < 2 then '2026-07-18T10:00:00.000' end,
        case when g % 10 = 0 then 'West' end,
        ${now - 2 * DAY}, substr(md5('digest-' || g), 1, 22), g
      from generate_series(1, ${count}) g`)
    await run(`update events set feed_seq = ${count} where id = ${event}`)
  }
  await run(`insert into customers (phone, email, created_at)
    select '+49151' || lpad(g::text, 8, '0'), 'consumer' || g || '@example.com', ${now - 30 * DAY}
    from generate_series(1, ${n}) g`)
  // N refreshes leave N rows: families of five, four rotated away, the last one live.
  await run(`insert into refresh_tokens (jti, family_id, subject_kind, subject_id, expires_at, created_at, rotated_at)
    select md5('refresh-' || g), md5('family-' || (g / 5)), 'consumer', 1 + g % ${n}, ${now + 29 * DAY},
      ${now - DAY}, case when g % 5 < 4 then ${now - DAY} end
    from generate_series(1, ${n}) g`)
  // N live revocations (API keys, access and offline tokens revoked in their own right): expiring over
  // the next 30 days, revoked over the last 30 (the cursor's few seconds of overlap see almost none).
  await run(`insert into revoked_tokens (jti, expires_at, revoked_at)
    select md5('revoked-' || g), ${now + HOUR} + (g::bigint * 7919) % ${30 * DAY}, ${now - 10_000} - (g::bigint * 104729) % ${30 * DAY}
    from generate_series(1, ${n}) g`)
  // Mostly logins that succeeded; the filters look for the rarer kinds (4 %) and outcomes (5 %), each
  // often enough for a full first page (51) in the 10,000-ticket copy too.
  await run(`insert into audit_log (at, kind, actor, ip, outcome, detail)
    select ${now} - g * 1000, case when g % 25 = 0 then 'password_reset' else 'login' end, 'consumer:' || g,
      '10.0.0.1', case when g % 20 = 0 then 'failure' else 'success' end, null
    from generate_series(1, ${Math.ceil(n / 5)}) g`)
  await run(`insert into partners (event_id, name, created_at) values (1, 'Bench partner', ${now})`)
  const deliveries = Math.ceil(n / 10)
  // 5 % failed: the status filter's first page is full (50) in the 10,000-ticket copy too. At 1 %, it held
  // 10 deliveries there against 50 at a million, and the growth measured the page's size.
  await run(`insert into webhook_deliveries (uid, event_id, partner_id, payload, status, attempts, delivered_at, created_at)
    select md5('delivery-' || g), 1, (select min(id) from partners where event_id = 1), '{}',
      case when g % 100 = 0 then 'pending' when g % 20 = 1 then 'failed' else 'delivered' end, 1, ${now}, ${now} - g * 100
    from generate_series(1, ${deliveries}) g`)
  await run(`insert into webhook_attempts (delivery_id, attempted_at, url, status_code, duration_ms)
    select id, created_at, 'https://receiver.example/hook', case when status = 'delivered' then 200 else 503 end, 20
    from webhook_deliveries`)
  // What a database that grew over months has done by itself: vacuumed (visibility map, statistics) and
  // checkpointed, so the measures do not run beside the load's own aftermath.
  await run('vacuum analyze')
  await run('checkpoint')
  return (performance.now() - started) / 1000
}

/**
 * The sync section alone: the two events' tickets only, written as the ledger holds them (a code digest
 * each, feed positions 1..n), then 40 % marked used at the service's gates over the last day.
 */
async function loadTickets(handle: DatabaseHandle, n: number) {
  const db = handle.db
  const now = Date.now()
  await seedCopy(db)
  const started = performance.now()
  for (const [event, count] of [
    [1, n],
    [2, SIDE_EVENT],
  ] as const) {
    const type = await db
      .insertInto('ticket_types')
      .values({
        uid: randomBytes(16).toString('hex'),
        event_id: event,
        name: 'Day',
        price: 4990,
        ticket_date: '2026-07-18T10:00:00.000',
        created_at: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow()
    await fillLedger(db, { eventId: event, ticketTypeId: type.id, count, now })
  }
  await sql`update transfers set status = 'USED', used_at = ${sql.lit(now)} - (id % 86400) * 1000,
      used_timestamp = '2026-07-18T10:00:00.000', used_gate = (case when id % 10 = 0 then 'West' end)
    where event_id = 1 and id % 5 < 2`.execute(db)
  await sql.raw(handle.dialect === 'postgres' ? 'vacuum analyze' : 'analyze').execute(db)
  return (performance.now() - started) / 1000
}

let addresses = 0
/** A client address per request, so the per-address limits (120 stats calls a minute) stay out of the way. */
const address = () => {
  addresses++
  return `10.${(addresses >> 16) & 255}.${(addresses >> 8) & 255}.${addresses & 255}`
}

async function get(service: Service, url: string, headers: Record<string, string>) {
  const res = await fetch(`${service.origin}${url}`, {
    headers: { ...headers, 'x-forwarded-for': address() },
  })
  const body = await res.text()
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${body.slice(0, 200)}`)
  return body
}

/** One loaded copy, served by its own `wristband serve`, with what the measures need. */
interface Copy {
  n: number
  loadSeconds: number
  rssMb: number
  service: Service
  handle: DatabaseHandle
  env: Record<string, string>
  auth: Record<string, string>
  operator: string
  uids: string[]
}

async function openCopy(n: number): Promise<Copy> {
  let loadSeconds = 0
  let target: { url: string; schema: string } | undefined
  const service = await startService(
    { name: `memory/${DATABASE}`, state: 'memory', database: DATABASE },
    {
      backends: { databaseUrl, redisUrl },
      logLevel: 'warn',
      env: { METRICS_TOKEN },
      ...(SECTIONS.has('sync') ? { cpu: '0,1' } : {}),
      ...(PROFILE ? { profileDir: path.resolve(PROFILE, String(n)) } : {}),
      prepare: async (handle, config) => {
        loadSeconds = await (SYNC_ONLY ? loadTickets(handle, n) : load(handle, n))
        target = { url: config.databaseUrl, schema: config.DATABASE_SCHEMA }
      },
    },
  )
  const rssMb = rssBytes(service.pid) / 2 ** 20
  const handle = await openDatabase(target!.url, { schema: target!.schema })
  const uids = (
    await handle.db
      .selectFrom('transfers')
      .select('uid')
      .where('event_id', '=', 1)
      .where('used_at', 'is', null)
      .limit(SAMPLES * 4 + 20 + (SECTIONS.has('sync') ? 20_000 : 0))
      .execute()
  ).map((r) => r.uid)
  const admin = (await service.login()).access_token
  const op = await service.post('/auth/login', { ...OPERATOR, role: 'operator' })
  if (op.status !== 200) throw new Error(`operator login: ${op.status} ${op.body}`)
  return {
    n,
    loadSeconds,
    rssMb,
    service,
    handle,
    env: { DATABASE_URL: target!.url, DATABASE_SCHEMA: target!.schema },
    auth: { authorization: `Bearer ${admin}` },
    operator: JSON.parse(op.body).access_token,
    uids,
  }
}

type Timing = { p50: number; p95: number }

/**
 * Times `fn` on both copies, alternating them sample by sample (the order too), so that whatever else
 * the shared machine does falls on both alike.
 */
async function paired(copies: [Copy, Copy], fn: (c: Copy) => Promise<unknown>, samples = SAMPLES) {
  for (let i = 0; i < 5; i++) for (const c of copies) await fn(c)
  const ms: [number[], number[]] = [[], []]
  for (let i = 0; i < samples; i++)
    for (const k of i % 2 === 0 ? [0, 1] : [1, 0]) {
      const t = performance.now()
      await fn(copies[k]!)
      ms[k]!.push(performance.now() - t)
    }
  return ms.map((m) => ({ p50: percentile(m, 50), p95: percentile(m, 95) })) as [Timing, Timing]
}

async function use(c: Copy): Promise<void> {
  const uid = c.uids.pop()
  if (uid === undefined) throw new Error(`the copy of ${c.n} tickets has no unused ticket left to use`)
  const res = await fetch(`${c.service.origin}/tickets/${uid}/use`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${c.operator}`,
      'content-type': 'application/json',
      'x-forwarded-for': address(),
    },
    body: JSON.stringify({ access_gate: 'North' }),
  })
  await res.text()
  if (res.status === 503) throw Object.assign(new Error('503'), { status: 503 })
  if (res.status !== 200) throw new Error(`ticket use answered ${res.status}`)
}

/** Ticket uses while eight dashboards poll the copy's stats back to back (the page polls every 15 s). */
async function usesWhilePolled(c: Copy, count: number) {
  let polling = true
  let polls = 0
  const poller = async () => {
    while (polling) {
      const res = await fetch(`${c.service.origin}/events/1/stats`, {
        headers: { ...c.auth, 'x-forwarded-for': address() },
      })
      await res.text()
      if (res.status !== 200) throw new Error(`a dashboard's poll answered ${res.status}`)
      polls++
    }
  }
  const pollers = Array.from({ length: 8 }, poller)
  const ms: number[] = []
  let errors503 = 0
  try {
    for (let i = 0; i < count; i++) {
      const t = performance.now()
      try {
        await use(c)
      } catch (err) {
        if ((err as { status?: number }).status !== 503) throw err
        errors503++
      }
      ms.push(performance.now() - t)
    }
  } finally {
    polling = false
    await Promise.all(pollers)
  }
  return { ms, errors503, polls }
}

interface StartUp {
  /** To the first 200 of /ready. */
  readyMs: number
  /** To /ready/verify answering 200 three times in a row on new connections: the list loaded. */
  loadedMs: number
  /** The process's RSS then (in process only: with workers, the primary's says nothing). */
  rssMb: number
}

/** Start-up of `wristband serve` on the copy's database: in process, or with Redis and 2 workers. */
async function startUp(c: Copy, fleet: boolean): Promise<StartUp> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-scale-'))
  const port = await freePort()
  const prefix = `wbscale:${randomBytes(4).toString('hex')}:`
  const started = performance.now()
  const proc = spawnPinned(
    '0,1',
    [
      fileURLToPath(new URL('../bin/wristband.js', import.meta.url)),
      'serve',
      ...(fleet ? ['--workers', '2'] : []),
    ],
    {
      ...process.env,
      ...PRODUCTION_ENV,
      ...c.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      JWT_SECRET: BENCH_SECRET,
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      ...(fleet ? { REDIS_URL: redisUrl, REDIS_PREFIX: prefix } : {}),
    },
    dataDir,
  )
  try {
    await waitForHttp(`http://127.0.0.1:${port}/ready`, proc, 120_000)
    const readyMs = performance.now() - started
    const deadline = Date.now() + 300_000
    for (let ok = 0; ok < 3; ) {
      if (Date.now() > deadline) throw new Error('/ready/verify: not 200 within 5 minutes')
      const res = await fetch(`http://127.0.0.1:${port}/ready/verify`, { headers: { connection: 'close' } })
      await res.arrayBuffer()
      if (res.status === 200) ok++
      else {
        ok = 0
        await new Promise((r) => setTimeout(r, 20))
      }
    }
    const loadedMs = performance.now() - started
    return { readyMs, loadedMs, rssMb: fleet ? Number.NaN : rssBytes(proc.child.pid!) / 2 ** 20 }
  } finally {
    await proc.stop()
    fs.rmSync(dataDir, { recursive: true, force: true })
    // The fleet copied the revocations into Redis: up to a million keys a run, not left behind.
    if (fleet) await dropKeys(prefix)
  }
}

async function dropKeys(prefix: string) {
  const redis = new Redis(redisUrl, { lazyConnect: true })
  await redis.connect()
  try {
    let cursor = '0'
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 10_000)
      if (keys.length) await redis.unlink(...keys)
      cursor = next
    } while (cursor !== '0')
  } finally {
    redis.disconnect()
  }
}

/** The best (smallest) of each figure. */
const best = (runs: StartUp[]): StartUp => ({
  readyMs: Math.min(...runs.map((r) => r.readyMs)),
  loadedMs: Math.min(...runs.map((r) => r.loadedMs)),
  rssMb: Math.min(...runs.map((r) => r.rssMb)),
})

/** Holds a snapshot on a connection of its own until the returned function is called. */
async function holdSnapshot(db: DatabaseHandle['db']) {
  let release = () => {}
  const released = new Promise<void>((resolve) => {
    release = resolve
  })
  let done: Promise<void> = Promise.resolve()
  await new Promise<void>((held, failed) => {
    done = db.connection().execute(async (conn) => {
      await sql`begin isolation level repeatable read`.execute(conn)
      await sql`select count(*) from jobs`.execute(conn)
      held()
      await released
      await sql`rollback`.execute(conn)
    })
    done.catch(failed)
  })
  return async () => {
    release()
    await done
  }
}

/** Retention over the copy: a pass with nothing due, then passes with every row due until none is left. */
async function retentionOf(c: Copy) {
  const log = { info() {} } as never
  const config = { RETENTION_DAYS: 90, AUDIT_RETENTION_DAYS: 365 }
  // Best of three: the first pass also opens the handle's connection.
  let nothing = await pruneOnce({ db: c.handle.db, clock: systemClock, log, config })
  let nothingDueMs = Number.POSITIVE_INFINITY
  for (let i = 0; i < 3; i++) {
    const t = performance.now()
    const pass = await pruneOnce({ db: c.handle.db, clock: systemClock, log, config })
    const ms = performance.now() - t
    if (ms < nothingDueMs) {
      nothingDueMs = ms
      nothing = pass
    }
  }
  const future = { now: () => Date.now() + 400 * DAY }
  const release = RETENTION_SNAPSHOT ? await holdSnapshot(c.handle.db) : undefined
  const t = performance.now()
  let passes = 0
  let longestBatch = { table: '', ms: 0 }
  const batchMs: Record<string, number[]> = {}
  let deleted = 0
  // The passes of one drain, each from where the last stopped, as the job's runs carry it on.
  let drain: Drain | undefined
  for (;;) {
    const r = await pruneOnce({ db: c.handle.db, clock: future, log, config }, drain)
    drain = r.drain
    passes++
    if (r.longestBatch.ms > longestBatch.ms) longestBatch = r.longestBatch
    for (const [table, ms] of Object.entries(r.batchMs)) batchMs[table] = [...(batchMs[table] ?? []), ...ms]
    deleted += Object.values(r.deleted).reduce((a, b) => a + b, 0)
    if (!r.more) break
  }
  await release?.()
  return {
    nothingDueMs,
    nothingDueTableMs: nothing.tableMs,
    allDueMs: performance.now() - t,
    passes,
    deleted,
    longestBatch,
    batchMs,
  }
}

/** A device token of its own per scanner: first syncs are limited per device. */
let devices = 0
const deviceCodec = new JwtCodec({
  secret: BENCH_SECRET,
  previousSecrets: [],
  audience: 'wristband',
  issuer: 'wristband',
  clock: systemClock,
})
const scannerToken = (event = 1) =>
  deviceCodec.issue(
    {
      type: 'offline',
      sub: '1',
      role: 'operator',
      device_id: ++devices,
      event_ids: [event],
      permissions: { [String(event)]: [...BASELINE_SCOPES.device] },
    },
    3600,
  ).token

/** The bench thread's scanner target: addresses from its own counter. */
const targetOf = (c: Copy): ScanTarget => ({ origin: c.service.origin, address })

/** A scanner's first sync of the copy in the compact form, on the bench's own thread. */
const compactFirstSync = (c: Copy, event = 1, encoding = 'br') =>
  syncCompact(targetOf(c), {
    event,
    token: scannerToken(event),
    encoding,
    tickets: event === 1 ? c.n : SIDE_EVENT,
  })

/** The object form's first sync, page after page (gzip, as a plain HTTP client asks), or its 413. */
async function objectFirstSync(c: Copy) {
  const token = scannerToken()
  let cursor: string | undefined
  let wire = 0
  let tickets = 0
  const started = performance.now()
  for (;;) {
    const res = await rawGet(
      targetOf(c),
      `/events/1/scan-sync${cursor ? `?cursor=${cursor}` : ''}`,
      token,
      'gzip',
    )
    if (res.status === 413 && cursor === undefined)
      return { status: 413, ms: performance.now() - started, wire: res.wire, tickets }
    if (res.status !== 200)
      throw new Error(`object first sync answered ${res.status}: ${res.body.subarray(0, 200).toString()}`)
    const page = JSON.parse(res.body.toString())
    wire += res.wire
    tickets += page.tickets.length
    cursor = page.cursor
    if (!page.has_more) break
  }
  return { status: 200, ms: performance.now() - started, wire, tickets }
}

/** The feed moved more than a page past the last snapshot: the next first sync builds a new one (cold). */
async function moveFeed(c: Copy) {
  await c.handle.db
    .updateTable('events')
    .set((eb) => ({ feed_seq: eb('feed_seq', '+', 5001) }))
    .where('id', '=', 1)
    .execute()
}

/** Ticket uses at a gate's pace (one every USE_EVERY_MS) while `going()`, at most `max`: their times. */
async function pacedUses(c: Copy, going: () => boolean, max: number) {
  const ms: number[] = []
  while (going() && ms.length < max) {
    const t = performance.now()
    await use(c)
    ms.push(performance.now() - t)
    await sleep(USE_EVERY_MS)
  }
  return ms
}

/** A thread of scanners (lib/scanners-worker.ts): each round runs its first syncs at once there. */
function scannersThread(origin: string) {
  const worker = new Worker(new URL('./lib/scanners-worker.ts', import.meta.url), { workerData: { origin } })
  return {
    round: (jobs: FirstSyncJob[]) =>
      new Promise<{ ms: number }[]>((resolve, reject) => {
        worker.once('message', (m: { results?: { ms: number }[]; error?: string }) =>
          m.results ? resolve(m.results) : reject(new Error(m.error)),
        )
        worker.postMessage(jobs)
      }),
    close: () => worker.terminate(),
  }
}

async function syncOf(c: Copy) {
  const pid = c.service.pid
  // One cold first sync, the service's RSS sampled meanwhile, after one of the 10,000-ticket event
  // beside it (the code paths warm: what is measured is what the event's size adds).
  await compactFirstSync(c, 2)
  await moveFeed(c)
  await sleep(1000)
  const rssBefore = rssBytes(pid)
  let rssPeak = rssBefore
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, rssBytes(pid))
  }, 50)
  const cold = await compactFirstSync(c).finally(() => clearInterval(sampler))
  await sleep(3000)
  const rssKept = rssBytes(pid)
  const object = await objectFirstSync(c)
  // Ticket use quiet, then while four scanners do a cold first sync at once, round after round (a quiet
  // spell before each round, so that what else the machine does falls on both alike).
  const quiet: number[] = []
  const during: number[] = []
  const fours: number[] = []
  const thread = scannersThread(c.service.origin)
  // As many quiet uses as during each round before (a p95 of 100 quiet uses beside one of 900 during
  // them moved the ratio by a third from run to run), and the quiet ones topped up at the end.
  let spell = Math.ceil(SYNC_USES / 3)
  while (during.length < SYNC_USES || quiet.length < SYNC_USES || fours.length < 3) {
    quiet.push(...(await pacedUses(c, () => true, spell)))
    await moveFeed(c)
    let syncing = true
    // On a thread of their own (other devices: their reading of the pages stays off the event loop
    // that times the uses), with brotli as `@wristband/scanner` asks, decoded on that thread (at its
    // low priority: a device's own work). Uncompressed pages, which earlier runs asked for to keep the
    // decoding off the bench's CPU, made the service write 400 KB a page instead of 125 KB: its socket
    // writes were then the largest of its costs during the rounds (4.3 s of its CPU in a profiled run).
    const jobs = [1, 2, 3, 4].map(() => ({
      event: 1,
      token: scannerToken(),
      encoding: 'br',
      tickets: c.n,
    }))
    const scanners = thread.round(jobs).finally(() => {
      syncing = false
    })
    const round = await pacedUses(c, () => syncing, Number.POSITIVE_INFINITY)
    during.push(...round)
    spell = Math.max(spell, round.length)
    fours.push(Math.max(...(await scanners).map((x) => x.ms)))
  }
  if (quiet.length < during.length)
    quiet.push(...(await pacedUses(c, () => true, during.length - quiet.length)))
  await thread.close()
  const timing = (xs: number[]) => ({ p50: percentile(xs, 50), p95: percentile(xs, 95), n: xs.length })
  return {
    coldMs: cold.ms,
    coldWire: cold.wire,
    coldPages: cold.pages,
    rssBeforeMb: rssBefore / 2 ** 20,
    rssPeakAddedMb: (rssPeak - rssBefore) / 2 ** 20,
    rssKeptAddedMb: (rssKept - rssBefore) / 2 ** 20,
    object,
    quiet: timing(quiet),
    during: timing(during),
    fourMs: percentile(fours, 50),
    rounds: fours.length,
  }
}

const NaNTiming: Timing = { p50: Number.NaN, p95: Number.NaN }

async function measure() {
  const small = await openCopy(SMALL)
  const large = await openCopy(LARGE)
  const copies: [Copy, Copy] = [small, large]
  const none = [NaNTiming, NaNTiming] as [Timing, Timing]
  try {
    let stats = none
    let sideStats = none
    let eventList = none
    let metrics = none
    let useIdle = none
    let filters = { auditKind: none, auditOutcome: none, auditActor: none, deliveriesStatus: none }
    let usePolled = [0, 1].map(() => ({ ...NaNTiming, errors503: 0, polls: 0 }))
    if (SECTIONS.has('serve')) {
      stats = await paired(copies, (c) => get(c.service, '/events/1/stats', c.auth))
      sideStats = await paired(copies, (c) => get(c.service, '/events/2/stats', c.auth))
      eventList = await paired(copies, (c) => eventListFigures(c.handle.db, [1, 2]))
      metrics = await paired(copies, (c) =>
        get(c.service, '/metrics', { authorization: `Bearer ${METRICS_TOKEN}` }),
      )
      useIdle = await paired(copies, use)
      // The filters of the audit and delivery pages, through their store functions (the first page).
      const partnerOf = async (c: Copy) =>
        (
          await c.handle.db
            .selectFrom('partners')
            .select('id')
            .where('event_id', '=', 1)
            .executeTakeFirstOrThrow()
        ).id
      const partners = [await partnerOf(small), await partnerOf(large)]
      const filter = (fn: (c: Copy) => Promise<unknown>) => paired(copies, fn, FILTER_SAMPLES)
      filters = {
        auditKind: await filter((c) => pageAuditEntries(c.handle.db, { kind: 'password_reset', limit: 51 })),
        auditOutcome: await filter((c) => pageAuditEntries(c.handle.db, { outcome: 'failure', limit: 51 })),
        auditActor: await filter((c) => pageAuditEntries(c.handle.db, { actor: 'consumer:1000', limit: 51 })),
        deliveriesStatus: await filter((c) =>
          listDeliveries(c.handle.db, partners[c === small ? 0 : 1]!, { status: 'failed', limit: 50 }),
        ),
      }
      // Polled in turns (small, large, small, large), half the samples each turn.
      const polled = [
        { ms: [] as number[], errors503: 0, polls: 0 },
        { ms: [] as number[], errors503: 0, polls: 0 },
      ]
      for (const k of [0, 1, 0, 1]) {
        const r = await usesWhilePolled(copies[k]!, Math.ceil(SAMPLES / 2))
        polled[k]!.ms.push(...r.ms)
        polled[k]!.errors503 += r.errors503
        polled[k]!.polls += r.polls
      }
      usePolled = polled.map((p) => ({
        p50: percentile(p.ms, 50),
        p95: percentile(p.ms, 95),
        errors503: p.errors503,
        polls: p.polls,
      }))
    }
    const noStart: StartUp = { readyMs: Number.NaN, loadedMs: Number.NaN, rssMb: Number.NaN }
    const inProcess: StartUp[][] = [[], []]
    const fleet: StartUp[][] = [[], []]
    if (SECTIONS.has('startup'))
      for (const k of [0, 1, 0, 1]) {
        inProcess[k]!.push(await startUp(copies[k]!, false))
        fleet[k]!.push(await startUp(copies[k]!, true))
      }
    // Before retention, which empties the copies.
    const sync: Awaited<ReturnType<typeof syncOf>>[] = []
    if (SECTIONS.has('sync')) for (const c of copies) sync.push(await syncOf(c))
    const retention: Awaited<ReturnType<typeof retentionOf>>[] | undefined = SECTIONS.has('retention')
      ? []
      : undefined
    if (retention) for (const c of copies) retention.push(await retentionOf(c))
    const figures = (c: Copy, k: 0 | 1) => ({
      n: c.n,
      loadSeconds: c.loadSeconds,
      rssMb: c.rssMb,
      stats: stats[k]!,
      sideStats: sideStats[k]!,
      eventList: eventList[k]!,
      metrics: metrics[k]!,
      useIdle: useIdle[k]!,
      auditKind: filters.auditKind[k]!,
      auditOutcome: filters.auditOutcome[k]!,
      auditActor: filters.auditActor[k]!,
      deliveriesStatus: filters.deliveriesStatus[k]!,
      usePolled: usePolled[k]!,
      startInProcess: inProcess[k]!.length ? best(inProcess[k]!) : noStart,
      startFleet: fleet[k]!.length ? best(fleet[k]!) : noStart,
      retention: retention?.[k],
      sync: sync[k],
    })
    return [figures(small, 0), figures(large, 1)] as const
  } finally {
    for (const c of copies) {
      await c.handle.close()
      await c.service.dispose()
    }
  }
}

type SyncFigures = Awaited<ReturnType<typeof syncOf>>

/** The sync section's table: each measure small and large, beside its goal (at the large size). */
function syncLines(a: SyncFigures, b: SyncFigures): string[] {
  const ms = (x: number) => `${f0(x)} ms`
  const mb = (x: number) => `${f1(x)} MB`
  const both = (name: string, f: (x: SyncFigures) => string, goal = '-') => [name, f(a), f(b), goal]
  const object = (x: SyncFigures) =>
    x.object.status === 413
      ? `413 in ${ms(x.object.ms)}`
      : `${ms(x.object.ms)}, ${mb(x.object.wire / 1e6)} (${f0(x.object.tickets)} tickets)`
  const uses = (t: SyncFigures['quiet']) => `${t.p50.toFixed(1)} / ${t.p95.toFixed(1)} ms (${t.n})`
  const rows = [
    both(
      'first sync, one scanner, cold (compact form, brotli, to the delta after it)',
      (x) => ms(x.coldMs),
      '≤ 3,000 ms',
    ),
    both('its bytes on the wire, pages', (x) => `${mb(x.coldWire / 1e6)}, ${x.coldPages}`),
    both('service RSS added, kept 3 s after', (x) => mb(x.rssKeptAddedMb), '≤ 50 MB'),
    both('service RSS added, peak during it', (x) => mb(x.rssPeakAddedMb)),
    both('service RSS before it', (x) => mb(x.rssBeforeMb)),
    both('object form, first sync (gzip)', object, '413 above 100,000 tickets'),
    both('ticket use, quiet, p50 / p95 (uses)', (x) => uses(x.quiet)),
    both('ticket use during four cold first syncs, p50 / p95 (uses)', (x) => uses(x.during)),
    both('ticket use p95, during / quiet', (x) => `${(x.during.p95 / x.quiet.p95).toFixed(2)}×`, '≤ 1.5×'),
    both(
      'four scanners at once, cold: the slowest (median of rounds)',
      (x) => `${ms(x.fourMs)} (${x.rounds})`,
    ),
  ]
  return table(['first sync', f0(SMALL), f0(LARGE), 'goal'], rows, [false, true, true, false])
}

async function main() {
  for (const [what, problem] of [
    ['PostgreSQL', DATABASE === 'postgres' ? await checkPostgres(databaseUrl) : undefined],
    ['Redis', SECTIONS.has('startup') ? await checkRedis(redisUrl) : undefined],
  ] as const)
    if (problem) throw new Error(`bench:scale needs ${what}: ${problem}`)
  const machine = machineLine()
  const load1 = os.loadavg()[0]!
  const [small, large] = await measure()
  const load2 = os.loadavg()[0]!
  const growth = (a: number, b: number) => (a > 0 && Number.isFinite(b) ? `${f1(b / a)}×` : '-')
  const ms = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(1))
  const row = (name: string, a: number | undefined, b: number | undefined, goal = '-', unit = 'ms') => [
    name,
    ms(a) === '-' ? '-' : `${ms(a)} ${unit}`,
    ms(b) === '-' ? '-' : `${ms(b)} ${unit}`,
    a === undefined || b === undefined ? '-' : growth(a, b),
    goal,
  ]
  const perMillion = (a: number, b: number) => ((b - a) / (LARGE - SMALL)) * 1_000_000
  const rs = [small.retention, large.retention]
  const rows = [
    row('stats, dashboard poll, p50', small.stats.p50, large.stats.p50),
    row('stats, dashboard poll, p95', small.stats.p95, large.stats.p95),
    row(
      `stats of a ${f0(SIDE_EVENT)}-ticket event beside the big one, p95`,
      small.sideStats.p95,
      large.sideStats.p95,
    ),
    row("dashboard's event list figures, p95", small.eventList.p95, large.eventList.p95),
    row('/metrics scrape (pending deliveries), p95', small.metrics.p95, large.metrics.p95),
    row('ticket use idle, p95', small.useIdle.p95, large.useIdle.p95),
    row('audit page filtered by kind (4 % of rows), p95', small.auditKind.p95, large.auditKind.p95, '≤ 1.5×'),
    row(
      'audit page filtered by outcome (5 %), p95',
      small.auditOutcome.p95,
      large.auditOutcome.p95,
      '≤ 1.5×',
    ),
    row('audit page filtered by actor, p95', small.auditActor.p95, large.auditActor.p95, '≤ 1.5×'),
    row(
      "a partner's deliveries filtered by status (5 %), p95",
      small.deliveriesStatus.p95,
      large.deliveriesStatus.p95,
      '≤ 1.5×',
    ),
    row('ticket use while 8 dashboards poll, p95', small.usePolled.p95, large.usePolled.p95),
    [
      'ticket use while 8 dashboards poll: 503s',
      SECTIONS.has('serve') ? String(small.usePolled.errors503) : '-',
      SECTIONS.has('serve') ? String(large.usePolled.errors503) : '-',
      '-',
      '0',
    ],
    row('RSS after start (bench service)', small.rssMb, large.rssMb, '-', 'MB'),
    [
      'memory per million refreshes (RSS growth, the list loaded)',
      '',
      `${f1(perMillion(small.rssMb, large.rssMb))} MB`,
      '-',
      '-',
    ],
    row(
      'start-up to /ready, in process, live revocations = N',
      small.startInProcess.readyMs,
      large.startInProcess.readyMs,
      '≤ 3,000 ms',
    ),
    row(
      'start-up to /ready/verify 200 (list loaded), in process',
      small.startInProcess.loadedMs,
      large.startInProcess.loadedMs,
    ),
    row(
      'start-up to /ready, Redis, 2 workers',
      small.startFleet.readyMs,
      large.startFleet.readyMs,
      '≤ 3,000 ms',
    ),
    row(
      'start-up to /ready/verify 200, Redis, 2 workers',
      small.startFleet.loadedMs,
      large.startFleet.loadedMs,
    ),
    row('RSS in process, list loaded', small.startInProcess.rssMb, large.startInProcess.rssMb, '-', 'MB'),
    [
      'RSS per million live revocations (growth of the above)',
      '',
      Number.isNaN(large.startInProcess.rssMb)
        ? '-'
        : `${f1(perMillion(small.startInProcess.rssMb, large.startInProcess.rssMb))} MB`,
      '-',
      '≤ 20 MB',
    ],
    row('retention pass, nothing due', rs[0]?.nothingDueMs, rs[1]?.nothingDueMs, '≤ 10 ms'),
    row('retention, all due: until done', rs[0]?.allDueMs, rs[1]?.allDueMs),
    [
      'retention, all due: passes, rows deleted',
      rs[0] ? `${rs[0].passes}, ${f0(rs[0].deleted)}` : '-',
      rs[1] ? `${rs[1].passes}, ${f0(rs[1].deleted)}` : '-',
      '-',
      '-',
    ],
    row('retention, all due: longest batch', rs[0]?.longestBatch.ms, rs[1]?.longestBatch.ms, '≤ 100 ms'),
  ]
  const lines = [
    `# bench:scale — ${f0(SMALL)} vs ${f0(LARGE)}`,
    '',
    `${machine} Load average (1 min) ${load1.toFixed(1)} when the measures began, ${load2.toFixed(1)} when they ended; ${new Date().toISOString()}. Sections: ${[...SECTIONS].join(', ')}.${RETENTION_SNAPSHOT && SECTIONS.has('retention') ? ' Retention drained while another transaction held a snapshot.' : ''}`,
    `Loaded: ${f1(small.loadSeconds)} s and ${f1(large.loadSeconds)} s (tickets, links and their tokens, consumers, ` +
      `refresh tokens, live revocations, audit rows and deliveries, counters by the triggers); ${SAMPLES} samples a measure (${FILTER_SAMPLES} for the filters)` +
      (SECTIONS.has('serve')
        ? `; the 8 pollers made ${f0(small.usePolled.polls)} and ${f0(large.usePolled.polls)} stats calls during the polled uses.`
        : '.'),
    '',
    ...table(['measure', f0(SMALL), f0(LARGE), 'growth', 'goal'], rows, [false, true, true, true, true]),
    '',
    ...rs.map((r, k) =>
      r
        ? `Retention with nothing due at ${f0(k === 0 ? SMALL : LARGE)}, by table: ${Object.entries(
            r.nothingDueTableMs,
          )
            .map(([t, v]) => `${t} ${v.toFixed(1)} ms`)
            .join(', ')}; all due, each table's batches: ${Object.entries(r.batchMs)
            .map(([t, ms]) => `${t} ${batchLine(ms)}`)
            .join('; ')}.`
        : '',
    ),
    SECTIONS.has('serve')
      ? `Ticket use p50: idle ${ms(small.useIdle.p50)} / ${ms(large.useIdle.p50)} ms, polled ${ms(small.usePolled.p50)} / ${ms(large.usePolled.p50)} ms; stats p50 ${ms(small.stats.p50)} / ${ms(large.stats.p50)} ms.`
      : '',
  ]
  const sync = small.sync && large.sync ? syncLines(small.sync, large.sync) : []
  const head = `${machine} Load average (1 min) ${load1.toFixed(1)} when the measures began, ${load2.toFixed(1)} when they ended; ${new Date().toISOString()}.`
  if (SYNC_ONLY) {
    const out = [
      `# bench:scale, first sync — ${f0(SMALL)} vs ${f0(LARGE)} tickets, ${DATABASE === 'sqlite' ? 'SQLite' : 'PostgreSQL'}`,
      '',
      `${head} Loaded (the tickets only): ${f1(small.loadSeconds)} s and ${f1(large.loadSeconds)} s.`,
      '',
      ...sync,
    ]
    console.log(out.join('\n'))
    if (process.env.SCALE_RESULTS !== '0') {
      const dir = fileURLToPath(new URL('./results/', import.meta.url))
      fs.writeFileSync(path.join(dir, `scale-sync-${DATABASE}.md`), `${out.join('\n')}\n`)
      fs.writeFileSync(
        path.join(dir, `scale-sync-${DATABASE}.json`),
        `${JSON.stringify({ small: small.sync, large: large.sync, load: [load1, load2] }, null, 2)}\n`,
      )
    }
    process.exit(0)
  }
  lines.push(...(sync.length ? ['', ...sync] : []))
  console.log(lines.join('\n'))
  if (process.env.SCALE_RESULTS !== '0') {
    const dir = fileURLToPath(new URL('./results/', import.meta.url))
    fs.writeFileSync(path.join(dir, 'scale.md'), `${lines.join('\n')}\n`)
    fs.writeFileSync(
      path.join(dir, 'scale.json'),
      `${JSON.stringify({ small, large, load: [load1, load2], sections: [...SECTIONS] }, null, 2)}\n`,
    )
  }
  process.exit(0)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
