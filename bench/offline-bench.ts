// npm run bench:offline — the offline scanner and the scanner sync feed (docs/offline.md):
//   1. scan() of codes the scanner synced (digest match) and of codes issued after its last sync
//      (Ed25519 signature check), on one core;
//   2. GET /events/{id}/scan-sync for 100,000 tickets: the first full sync (the object form, and the
//      compact form `format=columns` on the wire with brotli and gzip, a snapshot built three times, the
//      median and range, then reused) and an empty delta;
//   3. ticket use (POST /tickets/{uid}/use), one every 5 ms, idle and while four scanners do a first sync
//      at once on a new snapshot, in OFFLINE_BENCH_ROUNDS rounds (5) whose uses are pooled.
// Writes bench/results/offline.md and .json. BENCH_DATABASE_URL=postgres://… measures the feed on
// PostgreSQL instead of SQLite (bench/results/offline-postgresql.md).
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import fs from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import zlib from 'node:zlib'
import { CompactSign, calculateJwkThumbprint, type JWK } from 'jose'
import { Scanner, type ScannerState } from '../packages/scanner/src/index.js'
import { nodeDigest } from '../packages/scanner/src/node.js'
import { BASELINE_SCOPES } from '../src/identities/grants.js'
import { applySeed } from '../src/seed/seed.js'
import { JwtCodec } from '../src/tokens/jwt.js'
import { fillLedger } from '../test/helpers/ledger.js'
import { openBenchApp } from './lib/bench-app.js'
import { hasCommand, pinSelf } from './lib/processes.js'

const TICKETS = Number(process.env.OFFLINE_BENCH_TICKETS ?? 100_000)
const SCANS = Number(process.env.OFFLINE_BENCH_SCANS ?? 20_000)
const SECRET = 'bench-secret-that-is-at-least-32-bytes-long!'
const USE_EVERY_MS = Number(process.env.OFFLINE_BENCH_USE_EVERY_MS ?? 5)
/** Rounds of four scanners' first syncs at once (their ticket uses pooled). */
const ROUNDS = Number(process.env.OFFLINE_BENCH_ROUNDS ?? 5)

if (hasCommand('taskset')) pinSelf(0)
const rate = (n: number, ms: number) => Math.round(n / (ms / 1000))

async function scanBench() {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  const raw = publicKey.export({ format: 'jwk' }) as JWK
  const kid = (await calculateJwkThumbprint(raw)).slice(0, 11)
  const jwk = { ...raw, kid, alg: 'EdDSA', use: 'sig' }
  const sign = (t: string) =>
    new CompactSign(
      Buffer.from(JSON.stringify({ e: 1, t, k: 'b'.repeat(32), n: 1, nbf: 1, exp: 4_000_000_000 })),
    )
      .setProtectedHeader({ alg: 'EdDSA', kid })
      .sign(privateKey)
  const synced: string[] = []
  const late: string[] = []
  const tickets: ScannerState['tickets'] = {}
  for (let i = 0; i < SCANS; i++) {
    const t = randomBytes(16).toString('hex')
    const code = await sign(t)
    synced.push(code)
    tickets[t] = { v: 1, d: nodeDigest(code), u: null, g: null }
  }
  // The rest of a 100,000-ticket event, so look-ups run against a full map.
  for (let i = SCANS; i < TICKETS; i++)
    tickets[randomBytes(16).toString('hex')] = {
      v: 1,
      d: randomBytes(16).toString('base64url'),
      u: null,
      g: null,
    }
  for (let i = 0; i < SCANS / 4; i++) late.push(await sign(randomBytes(16).toString('hex')))
  // With check-in lists (docs/gate.md): the event's default list and a camping with re-entry, doors and
  // a nightly count-out, as a festival has them; each code is scanned as an entry there, then an exit,
  // then an entry again (three decisions of the rule per ticket, each reading its earlier scans).
  const lists: ScannerState['checkin_lists'] = [
    {
      id: 1,
      name: 'Default',
      is_default: true,
      ticket_type_ids: null,
      allow_multiple_entries: false,
      allow_entry_after_exit: false,
      windows: null,
      exit_all_at: null,
    },
    {
      id: 2,
      name: 'Camping',
      is_default: false,
      ticket_type_ids: ['b'.repeat(32)],
      allow_multiple_entries: false,
      allow_entry_after_exit: true,
      windows: [{ from: '2020-01-01T00:00:00', until: '2099-12-31T23:59:59' }],
      exit_all_at: '04:00',
    },
  ]
  const make = (digest?: typeof nodeDigest, withLists = false) =>
    new Scanner({
      ...(digest ? { digest } : {}),
      baseUrl: 'http://offline.invalid',
      eventId: 1,
      token: 'unused',
      state: {
        event_id: 1,
        cursor: '0',
        keys: [jwk],
        tickets: structuredClone(tickets),
        queue: [],
        ...(withLists ? { timezone: 'Europe/Berlin', checkin_lists: lists } : {}),
      },
    })
  const measure = async (codes: string[], digest?: typeof nodeDigest) => {
    const scanner = make(digest)
    const start = performance.now()
    for (const code of codes) {
      const r = await scanner.scan(code)
      if (r.status !== 'VALID') throw new Error(`bench code answered ${r.status}`)
    }
    return rate(codes.length, performance.now() - start)
  }
  const measureLists = async (codes: string[]) => {
    const scanner = make(nodeDigest, true)
    const start = performance.now()
    for (const direction of ['entry', 'exit', 'entry'] as const)
      for (const code of codes) {
        const r = await scanner.scan(code, { listId: 2, direction })
        if (r.status !== 'VALID') throw new Error(`bench code answered ${r.status} (${direction})`)
      }
    return rate(codes.length * 3, performance.now() - start)
  }
  await measure(synced.slice(0, 2000)) // warm-up
  return {
    syncedPerSecond: await measure(synced, nodeDigest),
    syncedWithListsPerSecond: await measureLists(synced),
    syncedWebCryptoPerSecond: await measure(synced),
    unsyncedPerSecond: await measure(late, nodeDigest),
  }
}

async function feedBench() {
  const { app, database, close } = await openBenchApp('offline', SECRET)
  try {
    const { db } = database
    const clock = { now: () => Date.now() }
    await applySeed(db, clock, {
      events: [{ id: 1, uid: 'bench-fest', name: 'Bench Fest', timezone: 'Europe/Berlin' }],
    })
    const now = Date.now()
    const type = await db
      .insertInto('ticket_types')
      .values({
        uid: 'a'.repeat(32),
        event_id: 1,
        name: 'Day',
        price: 100,
        ticket_date: '2026-07-18T12:00:00.000',
        created_at: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow()
    const fillStart = performance.now()
    const uids = await fillLedger(db, { eventId: 1, ticketTypeId: type.id, count: TICKETS, now })
    const fillMs = performance.now() - fillStart

    const token = new JwtCodec({
      secret: SECRET,
      previousSecrets: [],
      audience: 'wristband',
      issuer: 'wristband',
      clock,
    }).issue(
      {
        type: 'offline',
        sub: '1',
        role: 'operator',
        event_ids: [1],
        permissions: { '1': [...BASELINE_SCOPES.device] },
      },
      3600,
    ).token
    const codec = new JwtCodec({
      secret: SECRET,
      previousSecrets: [],
      audience: 'wristband',
      issuer: 'wristband',
      clock,
    })
    /** A device token of its own per scanner: first syncs are limited per device. */
    let devices = 0
    const scannerToken = () =>
      codec.issue(
        {
          type: 'offline',
          sub: '1',
          role: 'operator',
          device_id: ++devices,
          event_ids: [1],
          permissions: { '1': [...BASELINE_SCOPES.device] },
        },
        3600,
      ).token
    const staff = codec.issue(
      { type: 'access', sub: '1', role: 'operator', event_ids: [1], permissions: { '1': ['ticket:scan'] } },
      3600,
    ).token
    let address = 0
    const nextAddress = () => `10.9.${(++address >> 8) & 255}.${address & 255}`
    const get = (url: string, headers: Record<string, string> = {}, bearer = token) =>
      app.inject({
        method: 'GET',
        url,
        headers: { authorization: `Bearer ${bearer}`, 'x-forwarded-for': nextAddress(), ...headers },
      })
    const full = async () => {
      let cursor: string | undefined
      let tickets = 0
      let bytes = 0
      let pages = 0
      const start = performance.now()
      for (;;) {
        const res = await get(`/events/1/scan-sync${cursor ? `?cursor=${cursor}` : ''}`)
        if (res.statusCode !== 200) throw new Error(`feed answered ${res.statusCode}: ${res.body}`)
        const page = res.json()
        tickets += page.tickets.length
        bytes += res.rawPayload.length
        pages++
        cursor = page.cursor
        if (!page.has_more) break
      }
      return { ms: performance.now() - start, tickets, bytes, pages, cursor: cursor! }
    }
    await full() // warm-up
    const first = await full()
    if (first.tickets !== TICKETS) throw new Error(`full sync gave ${first.tickets} tickets`)
    const deltas: number[] = []
    for (let i = 0; i < 200; i++) {
      const start = performance.now()
      const res = await get(`/events/1/scan-sync?cursor=${first.cursor}`)
      deltas.push(performance.now() - start)
      if (res.json().tickets.length !== 0) throw new Error('the empty delta was not empty')
    }
    deltas.sort((a, b) => a - b)

    // The compact first sync as a scanner takes it: snapshot pages, then the delta from its position.
    const compact = async (encoding: string, bearer = scannerToken()) => {
      let cursor: string | undefined
      let bytes = 0
      let count = 0
      const start = performance.now()
      for (;;) {
        const q = `?format=columns${cursor ? `&cursor=${cursor}` : ''}`
        const res = await get(`/events/1/scan-sync${q}`, { 'accept-encoding': encoding }, bearer)
        if (res.statusCode !== 200) throw new Error(`compact feed answered ${res.statusCode}: ${res.body}`)
        bytes += res.rawPayload.length
        const enc = res.headers['content-encoding']
        const page = JSON.parse(
          (enc === 'br'
            ? zlib.brotliDecompressSync(res.rawPayload)
            : enc === 'gzip'
              ? zlib.gunzipSync(res.rawPayload)
              : res.rawPayload
          ).toString(),
        )
        count += page.count
        const first = cursor === undefined || cursor.includes('.')
        cursor = page.cursor
        if (!page.has_more && !first) break
      }
      return { ms: performance.now() - start, bytes, count }
    }
    // The feed moved more than a page past the last snapshot: the next first sync builds a new one.
    const moveFeed = async () => {
      await db
        .updateTable('events')
        .set((eb) => ({ feed_seq: eb('feed_seq', '+', 5001) }))
        .where('id', '=', 1)
        .execute()
    }
    // A cold snapshot three times (the median and the range), then reused.
    const colds: number[] = []
    for (let i = 0; i < 3; i++) {
      if (i > 0) await moveFeed()
      colds.push((await compact('br')).ms)
    }
    colds.sort((a, b) => a - b)
    const warmBr = await compact('br')
    const warmGzip = await compact('gzip')
    const warmPlain = await compact('identity')
    if (warmBr.count !== TICKETS) throw new Error(`compact sync gave ${warmBr.count} tickets`)

    // Ticket use, idle and while four scanners do a first sync (a fresh snapshot, built once, shared).
    let next = 0
    const use = async () => {
      const started = performance.now()
      const res = await app.inject({
        method: 'POST',
        url: `/tickets/${uids[next++]}/use`,
        headers: { authorization: `Bearer ${staff}`, 'x-forwarded-for': nextAddress() },
      })
      if (res.statusCode !== 200) throw new Error(`use answered ${res.statusCode}: ${res.body}`)
      return performance.now() - started
    }
    const percentiles = (xs: number[]) => {
      const sorted = [...xs].sort((a, b) => a - b)
      const at = (q: number) =>
        Number(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!.toFixed(2))
      return { p50: at(0.5), p95: at(0.95), max: at(1) }
    }
    // Uses at a gate's pace (one every USE_EVERY_MS, a busy festival's several gates), not back to back:
    // back-to-back uses would be a load of their own, and each is a change the scanners' deltas chase.
    const USES = Math.min(300, Math.floor(TICKETS / 4))
    const paced = async (until: () => boolean, max: number) => {
      const out: number[] = []
      while (until() && out.length < max) {
        out.push(await use())
        await sleep(USE_EVERY_MS)
      }
      return out
    }
    const idle = await paced(() => true, USES)
    // Four scanners' first syncs at once, each round on a new snapshot, in ROUNDS rounds whose paced uses
    // are pooled: one round is over in well under a second, too few uses for a steady p95.
    const busy: number[] = []
    const fours: number[] = []
    for (let round = 0; round < ROUNDS; round++) {
      await moveFeed()
      let syncing = true
      const scanners = Promise.all([1, 2, 3, 4].map(() => compact('br'))).finally(() => {
        syncing = false
      })
      busy.push(...(await paced(() => syncing, TICKETS - next)))
      fours.push(Math.max(...(await scanners).map((f) => f.ms)))
    }
    fours.sort((a, b) => a - b)
    return {
      backend: database.dialect === 'postgres' ? 'postgresql' : 'sqlite',
      fillMs: Math.round(fillMs),
      fullSyncMs: Math.round(first.ms),
      fullSyncPages: first.pages,
      fullSyncBytes: first.bytes,
      emptyDeltaMedianMs: Number(deltas[100]!.toFixed(2)),
      emptyDeltaP99Ms: Number(deltas[197]!.toFixed(2)),
      compactFirstSync: {
        coldBrMs: Math.round(colds[1]!),
        coldBrRangeMs: [Math.round(colds[0]!), Math.round(colds[2]!)],
        warmBrMs: Math.round(warmBr.ms),
        brBytes: warmBr.bytes,
        gzipBytes: warmGzip.bytes,
        plainBytes: warmPlain.bytes,
        fourScannersMs: Math.round(fours[Math.floor(fours.length / 2)]!),
        fourScannersRangeMs: [Math.round(fours[0]!), Math.round(fours[fours.length - 1]!)],
      },
      ticketUse: {
        idle: percentiles(idle),
        whileFourFirstSyncs: { ...percentiles(busy), uses: busy.length },
      },
    }
  } finally {
    await close()
  }
}

const scan = await scanBench()
// OFFLINE_BENCH_PARTS=scan: the scanner's figures alone (no feed, no files written).
if (process.env.OFFLINE_BENCH_PARTS === 'scan') {
  console.log(JSON.stringify({ date: new Date().toISOString(), node: process.version, scan }, null, 2))
  process.exit(0)
}
const feed = await feedBench()
const result = {
  date: new Date().toISOString(),
  node: process.version,
  tickets: TICKETS,
  scans: SCANS,
  scan,
  feed,
}
console.log(JSON.stringify(result, null, 2))
const md = `# Offline bench (npm run bench:offline)

${result.date}, Node ${result.node}, one core (taskset), ${TICKETS.toLocaleString('en')} tickets.

| what | figure |
|---|---|
| \`scan()\` of a synced code (digest match), \`@wristband/scanner/node\` | ${scan.syncedPerSecond.toLocaleString('en')} per second |
| \`scan()\` of a synced code on a check-in list with re-entry, windows and \`exit_all_at\` (entry, exit, entry again), \`@wristband/scanner/node\` | ${scan.syncedWithListsPerSecond.toLocaleString('en')} per second |
| the same with the WebCrypto digest (browsers) | ${scan.syncedWebCryptoPerSecond.toLocaleString('en')} per second |
| \`scan()\` of a code issued after the last sync (Ed25519 check) | ${scan.unsyncedPerSecond.toLocaleString('en')} per second |
| full sync, ${feed.backend} | ${feed.fullSyncMs} ms, ${feed.fullSyncPages} pages, ${(feed.fullSyncBytes / 1e6).toFixed(1)} MB |
| empty delta, ${feed.backend} | median ${feed.emptyDeltaMedianMs} ms, p99 ${feed.emptyDeltaP99Ms} ms |
| compact first sync (\`format=columns\`), on the wire: brotli / gzip / uncompressed | ${(feed.compactFirstSync.brBytes / 1e6).toFixed(2)} MB / ${(feed.compactFirstSync.gzipBytes / 1e6).toFixed(2)} MB / ${(feed.compactFirstSync.plainBytes / 1e6).toFixed(2)} MB |
| compact first sync, ${feed.backend}: snapshot built (median of 3, range) / shared | ${feed.compactFirstSync.coldBrMs} ms (${feed.compactFirstSync.coldBrRangeMs.join('–')}) / ${feed.compactFirstSync.warmBrMs} ms |
| four scanners' first syncs at once, a new snapshot (median of ${ROUNDS} rounds, range) | ${feed.compactFirstSync.fourScannersMs} ms (${feed.compactFirstSync.fourScannersRangeMs.join('–')}) |
| ticket use, idle (one every ${USE_EVERY_MS} ms): p50 / p95 | ${feed.ticketUse.idle.p50} / ${feed.ticketUse.idle.p95} ms |
| ticket use while four scanners do a first sync: p50 / p95 (${feed.ticketUse.whileFourFirstSyncs.uses} uses in ${ROUNDS} rounds) | ${feed.ticketUse.whileFourFirstSyncs.p50} / ${feed.ticketUse.whileFourFirstSyncs.p95} ms |
`
fs.mkdirSync('bench/results', { recursive: true })
// One file per feed backend: offline.md (SQLite), offline-postgresql.md.
const name = feed.backend === 'sqlite' ? 'offline' : `offline-${feed.backend}`
fs.writeFileSync(`bench/results/${name}.json`, `${JSON.stringify(result, null, 2)}\n`)
fs.writeFileSync(`bench/results/${name}.md`, md)
