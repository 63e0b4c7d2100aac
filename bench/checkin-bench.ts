// npm run bench:checkin — the reads of the gate's check-in lists as the scan log grows (docs/gate.md):
// GET /events/{id}/checkin-lists/{list}/status (counters kept with the scans) and GET /events/{id}/checkins
// (the log's first page, unfiltered and by reason, result, device and list), on two copies side by side:
// one whose log holds CHECKIN_BENCH_SMALL (10,000) scans and one holding CHECKIN_BENCH_LARGE (1,000,000),
// each its own app and database (SQLite files; BENCH_DATABASE_URL=postgres://… for two PostgreSQL
// schemas, dropped at the end). Each read is warmed up on both, then timed alternating the copies sample
// by sample (the order too), so that what else the shared machine does falls on both alike.
// Writes bench/results/checkin.md (checkin-postgresql.md) and .json (CHECKIN_RESULTS=0: print only, as the
// CI test does).
import os from 'node:os'
import { sql } from 'kysely'
import { applySeed } from '../src/seed/seed.js'
import { JwtCodec } from '../src/tokens/jwt.js'
import { type BenchApp, openBenchApp } from './lib/bench-app.js'
import { percentile, writeResults } from './lib/report.js'

const SMALL = Number(process.env.CHECKIN_BENCH_SMALL ?? 10_000)
const LARGE = Number(process.env.CHECKIN_BENCH_LARGE ?? 1_000_000)
const READS = Number(process.env.CHECKIN_BENCH_READS ?? 200)
/** Reads of each URL on each copy before the timed ones (the code paths and the caches warm). */
const WARM_UP = 20
const SECRET = 'bench-secret-that-is-at-least-32-bytes-long!'
const REASONS = ['already_used', 'product', 'invalid_time'] as const
const clock = { now: () => Date.now() }

const admin = new JwtCodec({
  secret: SECRET,
  previousSecrets: [],
  audience: 'wristband',
  issuer: 'wristband',
  clock,
}).issue(
  { type: 'access', sub: '1', role: 'admin', event_ids: [1], permissions: { '1': ['events:manage'] } },
  3600,
).token

/** One copy: an app on its own database, one check-in list whose log holds its scans. */
interface Copy extends BenchApp {
  listId: number
  fillMs: number
}

let address = 0
const call = (c: Copy, method: 'GET' | 'POST', url: string, payload?: unknown) =>
  c.app.inject({
    method,
    url,
    headers: {
      authorization: `Bearer ${admin}`,
      'x-forwarded-for': `10.8.${(++address >> 8) & 255}.${address & 255}`,
    },
    ...(payload ? { payload: payload as Record<string, unknown> } : {}),
  })

/** Writes `total` scans into the list's log, with their counters, as the service would have written them. */
async function fill(c: Copy, total: number) {
  const { db } = c.database
  const start = Date.UTC(2027, 6, 16, 8)
  const counts = new Map<string, number>()
  for (let scans = 0; scans < total; ) {
    const rows = []
    for (let i = 0; i < 1000 && scans < total; i++, scans++) {
      const at = start + scans * 250
      const refused = scans % 10 === 0
      const direction = scans % 3 === 2 ? 'exit' : 'entry'
      const reason = refused ? REASONS[scans % 3]! : null
      const local = new Date(at + 7_200_000).toISOString().slice(0, 23)
      rows.push({
        event_id: 1,
        list_id: c.listId,
        transfer_id: scans % 200_000,
        transfer_uid: (scans % 200_000).toString(16).padStart(32, '0'),
        direction,
        result: refused ? 'refused' : 'accepted',
        reason,
        first_use: null,
        scanned_at: at,
        local_at: local,
        gate: `Gate ${scans % 8}`,
        device_id: String(scans % 40),
        actor: 'operator:1',
        offline: null,
        nonce: null,
        created_at: at,
      })
      const measure = refused ? `refused:${reason}` : direction === 'entry' ? 'entries' : 'exits'
      counts.set(measure, (counts.get(measure) ?? 0) + 1)
      if (!refused && direction === 'entry')
        counts.set(`hour:${local.slice(0, 13)}`, (counts.get(`hour:${local.slice(0, 13)}`) ?? 0) + 1)
    }
    await db.insertInto('checkins').values(rows).execute()
  }
  for (const [measure, n] of counts)
    await db
      .insertInto('checkin_counts')
      .values({ list_id: c.listId, measure, n })
      .onConflict((oc) =>
        oc.columns(['list_id', 'measure']).doUpdateSet((eb) => ({ n: eb('checkin_counts.n', '+', n) })),
      )
      .execute()
  await sql.raw(c.database.dialect === 'postgres' ? 'vacuum analyze' : 'analyze').execute(db)
}

async function openCopy(size: number): Promise<Copy> {
  const c: Copy = { ...(await openBenchApp('checkin', SECRET)), listId: 0, fillMs: 0 }
  await applySeed(c.database.db, clock, {
    events: [{ id: 1, uid: 'bench-fest', name: 'Bench Fest', timezone: 'Europe/Berlin' }],
  })
  const created = await call(c, 'POST', '/events/1/checkin-lists', { name: 'Camping', exit_all_at: '04:00' })
  if (created.statusCode !== 201) throw new Error(created.body)
  c.listId = created.json().id
  const t0 = performance.now()
  await fill(c, size)
  c.fillMs = Math.round(performance.now() - t0)
  return c
}

async function timed(c: Copy, url: string): Promise<number> {
  const t0 = performance.now()
  const res = await call(c, 'GET', url)
  const ms = performance.now() - t0
  if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${res.body}`)
  return ms
}

/** p50 and p95 of READS reads of `url` on each copy, alternating them (the order too), after WARM_UP each. */
async function paired(copies: [Copy, Copy], url: (c: Copy) => string) {
  for (const c of copies) for (let i = 0; i < WARM_UP; i++) await timed(c, url(c))
  const ms: [number[], number[]] = [[], []]
  for (let i = 0; i < READS; i++)
    for (const k of i % 2 === 0 ? [0, 1] : [1, 0]) ms[k]!.push(await timed(copies[k]!, url(copies[k]!)))
  const at = (xs: number[], p: number) =>
    Number(
      percentile(
        [...xs].sort((a, b) => a - b),
        p,
      ).toFixed(2),
    )
  return ms.map((xs) => ({ p50: at(xs, 50), p95: at(xs, 95) }))
}

const READ_URLS: Record<string, (c: Copy) => string> = {
  status: (c) => `/events/1/checkin-lists/${c.listId}/status`,
  log: () => '/events/1/checkins?limit=100',
  logByReason: () => '/events/1/checkins?limit=100&reason=invalid_time',
  logRefused: () => '/events/1/checkins?limit=100&result=refused',
  logByDevice: () => '/events/1/checkins?limit=100&device_id=7',
  logByList: (c) => `/events/1/checkins?limit=100&checkin_list_id=${c.listId}`,
}
const SHOWN: Record<string, string> = {
  status: '`/events/1/checkin-lists/{list}/status`',
  log: '`/events/1/checkins?limit=100`',
  logByReason: '`…&reason=invalid_time`',
  logRefused: '`…&result=refused`',
  logByDevice: '`…&device_id=7`',
  logByList: '`…&checkin_list_id={list}`',
}

const copies: [Copy, Copy] = [await openCopy(SMALL), await openCopy(LARGE)]
const figures: Record<string, { p50: number; p95: number }[]> = {}
try {
  for (const [name, url] of Object.entries(READ_URLS)) {
    figures[name] = await paired(copies, url)
    console.log(name, JSON.stringify(figures[name]))
  }
} finally {
  for (const c of copies) await c.close()
}

const backend = process.env.BENCH_DATABASE_URL ? 'postgresql' : 'sqlite'
const load = os
  .loadavg()
  .map((l) => l.toFixed(1))
  .join(' ')
const result = {
  date: new Date().toISOString(),
  node: process.version,
  backend,
  load,
  reads: READS,
  fillMs: copies.map((c) => c.fillMs),
  figures,
}
const n = (x: number) => x.toLocaleString('en')
const ratio = (k: string, p: 'p50' | 'p95') => (figures[k]![1]![p] / figures[k]![0]![p]).toFixed(2)
const md = `# Check-in reads (npm run bench:checkin)

${result.date}, Node ${result.node}, ${backend}, load average at the end ${load}. Two copies, their logs
filled with ${n(SMALL)} and ${n(LARGE)} scans (in ${n(copies[0].fillMs)} and ${n(copies[1].fillMs)} ms); each read
${WARM_UP} times on each, then ${READS} times on each through the app (inject), alternating the copies.

| read | ${n(SMALL)} scans, p50 / p95 | ${n(LARGE)} scans, p50 / p95 | growth, p50 / p95 |
|---|--:|--:|--:|
${Object.keys(READ_URLS)
  .map(
    (k) =>
      `| ${SHOWN[k]} | ${figures[k]![0]!.p50} / ${figures[k]![0]!.p95} ms | ${figures[k]![1]!.p50} / ${figures[k]![1]!.p95} ms | ${ratio(k, 'p50')}× / ${ratio(k, 'p95')}× |`,
  )
  .join('\n')}
`
if (process.env.CHECKIN_RESULTS !== '0')
  writeResults(backend === 'sqlite' ? 'checkin' : `checkin-${backend}`, md, result)
console.log(md)
