// npm run bench:checkin — the reads of the gate's check-in lists as the scan log grows (docs/gate.md):
// GET /events/{id}/checkin-lists/{list}/status (counters kept with the scans) and GET /events/{id}/checkins
// (the log's first page, unfiltered and by reason, result and device), at CHECKIN_BENCH_SMALL (10,000) and
// CHECKIN_BENCH_LARGE (1,000,000) scans, on SQLite (BENCH_DATABASE_URL=postgres://… for PostgreSQL).
// Writes bench/results/checkin.md and .json.
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/platform/config.js'
import { openDatabase } from '../src/platform/db/database.js'
import { applySeed } from '../src/seed/seed.js'
import { JwtCodec } from '../src/tokens/jwt.js'

const SMALL = Number(process.env.CHECKIN_BENCH_SMALL ?? 10_000)
const LARGE = Number(process.env.CHECKIN_BENCH_LARGE ?? 1_000_000)
const READS = Number(process.env.CHECKIN_BENCH_READS ?? 200)
const SECRET = 'bench-secret-that-is-at-least-32-bytes-long!'
const REASONS = ['already_used', 'product', 'invalid_time'] as const

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-checkin-bench-'))
const dbUrl = process.env.BENCH_DATABASE_URL
const schema = `checkin_bench_${randomBytes(4).toString('hex')}`
const config = loadConfig({
  JWT_SECRET: SECRET,
  DATA_DIR: dir,
  LOG_LEVEL: 'warn',
  ...(dbUrl ? { DATABASE_URL: dbUrl, DATABASE_SCHEMA: schema } : {}),
})
const app = await buildApp(config)
const database = await openDatabase(config.databaseUrl, { schema: config.DATABASE_SCHEMA })
const { db } = database
const clock = { now: () => Date.now() }
await applySeed(db, clock, {
  events: [{ id: 1, uid: 'bench-fest', name: 'Bench Fest', timezone: 'Europe/Berlin' }],
})
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
let address = 0
const call = (method: 'GET' | 'POST', url: string, payload?: unknown) =>
  app.inject({
    method,
    url,
    headers: {
      authorization: `Bearer ${admin}`,
      'x-forwarded-for': `10.8.${(++address >> 8) & 255}.${address & 255}`,
    },
    ...(payload ? { payload: payload as Record<string, unknown> } : {}),
  })

const created = await call('POST', '/events/1/checkin-lists', { name: 'Camping', exit_all_at: '04:00' })
if (created.statusCode !== 201) throw new Error(created.body)
const listId: number = created.json().id

let scans = 0
/** Adds scans to the log up to `total`, with their counters, as the service would have written them. */
async function growTo(total: number) {
  const start = Date.UTC(2027, 6, 16, 8)
  const counts = new Map<string, number>()
  for (; scans < total; ) {
    const rows = []
    for (let i = 0; i < 1000 && scans < total; i++, scans++) {
      const at = start + scans * 250
      const refused = scans % 10 === 0
      const direction = scans % 3 === 2 ? 'exit' : 'entry'
      const reason = refused ? REASONS[scans % 3]! : null
      const local = new Date(at + 7_200_000).toISOString().slice(0, 23)
      rows.push({
        event_id: 1,
        list_id: listId,
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
      .values({ list_id: listId, measure, n })
      .onConflict((oc) =>
        oc.columns(['list_id', 'measure']).doUpdateSet((eb) => ({ n: eb('checkin_counts.n', '+', n) })),
      )
      .execute()
}

async function median(url: string): Promise<number> {
  const ms: number[] = []
  for (let i = 0; i < READS; i++) {
    const t0 = performance.now()
    const res = await call('GET', url)
    ms.push(performance.now() - t0)
    if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${res.body}`)
  }
  ms.sort((a, b) => a - b)
  return Number(ms[Math.floor(ms.length / 2)]!.toFixed(2))
}

const READ_URLS = {
  status: `/events/1/checkin-lists/${listId}/status`,
  log: '/events/1/checkins?limit=100',
  logByReason: '/events/1/checkins?limit=100&reason=invalid_time',
  logRefused: '/events/1/checkins?limit=100&result=refused',
  logByDevice: '/events/1/checkins?limit=100&device_id=7',
  logByList: `/events/1/checkins?limit=100&checkin_list_id=${listId}`,
}
const figures: Record<string, Record<string, number>> = {}
for (const size of [SMALL, LARGE]) {
  const t0 = performance.now()
  await growTo(size)
  const fillMs = Math.round(performance.now() - t0)
  const row: Record<string, number> = { fillMs }
  for (const [name, url] of Object.entries(READ_URLS)) row[name] = await median(url)
  figures[size] = row
  console.log(size, JSON.stringify(row))
}
await app.close()
await database.close()
fs.rmSync(dir, { recursive: true, force: true })

const backend = dbUrl ? 'postgresql' : 'sqlite'
const load = os
  .loadavg()
  .map((l) => l.toFixed(1))
  .join(' ')
const result = { date: new Date().toISOString(), node: process.version, backend, load, reads: READS, figures }
const ratio = (k: string) => (figures[LARGE]![k]! / figures[SMALL]![k]!).toFixed(2)
const md = `# Check-in reads (npm run bench:checkin)

${result.date}, Node ${result.node}, ${backend}, load average at the end ${load}; median of ${READS} reads
through the app (inject), the log grown from ${SMALL.toLocaleString('en')} to ${LARGE.toLocaleString('en')} scans.

| read | ${SMALL.toLocaleString('en')} scans | ${LARGE.toLocaleString('en')} scans | ratio |
|---|---|---|---|
${Object.keys(READ_URLS)
  .map(
    (k) =>
      `| \`${READ_URLS[k as keyof typeof READ_URLS]}\` | ${figures[SMALL]![k]} ms | ${figures[LARGE]![k]} ms | ${ratio(k)}× |`,
  )
  .join('\n')}
`
fs.mkdirSync('bench/results', { recursive: true })
const name = backend === 'sqlite' ? 'checkin' : `checkin-${backend}`
fs.writeFileSync(`bench/results/${name}.json`, `${JSON.stringify(result, null, 2)}\n`)
fs.writeFileSync(`bench/results/${name}.md`, md)
console.log(md)
