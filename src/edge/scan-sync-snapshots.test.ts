import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { before, test } from 'node:test'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import { sql } from 'kysely'
import { forEachBackend, startApp, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import {
  deviceToken,
  newTicketType,
  newTransfer,
  type PartnerKeys,
  seedPartner,
} from '../../test/helpers/partner.js'
import { until } from '../../test/helpers/until.js'
import { type Db, openDatabase } from '../platform/db/database.js'
import { SNAPSHOT_IDLE_MS } from './edge.service.js'

/** The largest event whose first sync the object form answers, in these suites. */
const MAX = 12
const ENV = { SCAN_SYNC_JSON_MAX_TICKETS: String(MAX) }

/** The snapshot files of an instance: `DATA_DIR/scan-sync/<instance>/<event>-<position>-<id>.{pages,gz}`. */
function snapshotFiles(t: TestApp): string[] {
  const root = path.join(t.config.DATA_DIR, 'scan-sync')
  if (!fs.existsSync(root)) return []
  return fs
    .readdirSync(root, { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.(pages|gz)$/.test(f))
    .sort()
}

const decoded = (res: { rawPayload: Buffer; headers: Record<string, unknown> }) => {
  const enc = res.headers['content-encoding']
  const raw = res.rawPayload
  return JSON.parse(
    (enc === 'br' ? brotliDecompressSync(raw) : enc === 'gzip' ? gunzipSync(raw) : raw).toString(),
  )
}

/**
 * The object form's first sync has a documented limit (SCAN_SYNC_JSON_MAX_TICKETS; docs/offline.md):
 * above it a sync without a cursor is 413 and scanners take the compact form, whose snapshot is built
 * off the request path and kept in files that go when it is let go.
 */
forEachBackend(
  httpBackends,
  "scan-sync: the object form's limit, the snapshot's files",
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let ticketUid: string
    let device = 500
    const scanner = () => deviceToken(t, 1, 1, ++device)
    const get = (url: string, token: string, encoding?: string) =>
      t.request({
        method: 'GET',
        url,
        token,
        ...(encoding ? { headers: { 'accept-encoding': encoding } } : {}),
      })

    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      ticketUid = await newTicketType(t, keys.write)
      for (let i = 0; i < MAX; i++) await newTransfer(t, keys.write, ticketUid)
    })

    test('the object form answers a first sync up to the limit, 413 full_sync_too_large above it; deltas and the compact form go on', async () => {
      const token = scanner()
      const atLimit = await get('/events/1/scan-sync', token)
      assert.equal(atLimit.statusCode, 200, atLimit.body)
      assert.equal(atLimit.json().tickets.length, MAX)
      const cursor = atLimit.json().cursor
      const late = await newTransfer(t, keys.write, ticketUid)
      for (const url of [
        '/events/1/scan-sync',
        '/events/1/scan-sync?cursor=0',
        '/events/1/scan-sync?limit=5',
      ]) {
        const refused = await get(url, token)
        assert.equal(refused.statusCode, 413, url)
        assert.equal(refused.json().error, 'full_sync_too_large')
        assert.match(refused.json().detail, /format=columns/)
      }
      const delta = await get(`/events/1/scan-sync?cursor=${cursor}`, token)
      assert.equal(delta.statusCode, 200)
      assert.deepEqual(
        delta.json().tickets.map((x: { transfer_uid: string }) => x.transfer_uid),
        [late.transfer_uid],
      )
      const compact = await get('/events/1/scan-sync?format=columns', token)
      assert.equal(compact.statusCode, 200)
      assert.equal(compact.json().count, MAX + 1)
      // Another event's limit is its own: event 2 has no tickets.
      const other = await get('/events/2/scan-sync', deviceToken(t, 1, 2, ++device))
      assert.equal(other.statusCode, 200)
      assert.deepEqual(other.json().tickets, [])
    })

    test("a snapshot is kept in files of the instance's own under DATA_DIR, the same bytes as served; let go, its files are deleted", async () => {
      // The feed moved more than a page past any earlier snapshot: this first sync takes a new one.
      await t.db.db
        .updateTable('events')
        .set((eb) => ({ feed_seq: eb('feed_seq', '+', 5001) }))
        .where('id', '=', 1)
        .execute()
      const before = new Set(snapshotFiles(t))
      const br = await get('/events/1/scan-sync?format=columns', scanner(), 'br')
      assert.equal(br.statusCode, 200)
      const gz = await get('/events/1/scan-sync?format=columns', scanner(), 'gzip')
      assert.equal(gz.headers['content-encoding'], 'gzip')
      assert.deepEqual(decoded(gz), decoded(br))
      const made = snapshotFiles(t).filter((f) => !before.has(f))
      assert.equal(made.length, 2, `one snapshot's two files: ${made.join(', ')}`)
      const pages = made.find((f) => f.endsWith('.pages'))!
      const stored = fs.readFileSync(path.join(t.config.DATA_DIR, 'scan-sync', pages))
      const json = Buffer.from(JSON.stringify(decoded(br)))
      assert.ok(stored.subarray(0, json.length).equals(json), 'the page as JSON, first in the file')
      assert.ok(stored.subarray(json.length).equals(br.rawPayload), 'then the very bytes served with brotli')
      assert.equal(decoded(br).count, MAX + 1)
      // Idle for ten minutes: the next first sync lets it go (its files deleted) and takes a new one.
      t.clock.advance(SNAPSHOT_IDLE_MS)
      const next = await get('/events/1/scan-sync?format=columns', scanner())
      assert.equal(next.statusCode, 200)
      const now = snapshotFiles(t)
      for (const f of made) assert.ok(!now.includes(f), `${f} deleted`)
      assert.equal(now.filter((f) => f.endsWith('.pages')).length, 1, 'the new snapshot only')
    })
  },
  ENV,
)

eachBackend(httpBackends, 'scan-sync: snapshot files when the service stops', (backend) => {
  test("closing the service ends its builds and deletes its snapshots' folder", async () => {
    const storage = await backend.provision()
    try {
      const t = await startApp(backend, ENV, storage)
      const keys = await seedPartner(t)
      const type = await newTicketType(t, keys.write)
      await newTransfer(t, keys.write, type)
      const res = await t.request({
        method: 'GET',
        url: '/events/1/scan-sync?format=columns',
        token: deviceToken(t, 1, 1, 900),
      })
      assert.equal(res.statusCode, 200)
      assert.equal(res.json().count, 1)
      const root = path.join(t.config.DATA_DIR, 'scan-sync')
      assert.equal(fs.readdirSync(root).length, 1, "the instance's own folder")
      await t.close()
      assert.deepEqual(fs.readdirSync(root), [])
    } finally {
      await storage.dispose()
    }
  })
})

// Holding the builds needs a lock that readers wait for: PostgreSQL's LOCK TABLE (SQLite's readers
// never wait for a writer). The limit itself is the same code on both.
eachBackend(
  httpBackends.filter((b) => b.name.startsWith('postgres')),
  'scan-sync: snapshot builds at once',
  (backend) => {
    test('at most four snapshot builds run at once: a fifth event’s first sync is read from the database', async () => {
      const storage = await backend.provision()
      const t = await startApp(backend, ENV, storage)
      const locker = await openDatabase(t.config.databaseUrl, {
        schema: t.config.DATABASE_SCHEMA,
        poolSize: 1,
      })
      try {
        await t.seed(
          withStandardSeed({
            events: [3, 4, 5].map((id) => ({ id, uid: `stage-${id}`, name: `Stage ${id}`, timezone: 'UTC' })),
          }),
        )
        const waiting = async (tx: Db) => {
          const r = await sql<{ n: string }>`select count(*) as n from pg_locks
            where relation = 'transfers'::regclass and not granted`.execute(tx)
          return Number(r.rows[0]!.n)
        }
        const firstSync = (eventId: number) =>
          t.request({
            method: 'GET',
            url: `/events/${eventId}/scan-sync?format=columns`,
            token: deviceToken(t, 1, eventId, 700 + eventId),
          })
        let answers: Promise<{ statusCode: number }>[] = []
        // Every reader of the tickets waits: the builds stay running while the first syncs arrive.
        await locker.db.transaction().execute(async (tx) => {
          await sql`lock table transfers in access exclusive mode`.execute(tx)
          answers = [1, 2, 3, 4].map(firstSync)
          await until('four builds wait for the tickets', async () => (await waiting(tx)) === 4)
          answers.push(firstSync(5))
          await until('the fifth first sync waits for the tickets too', async () => (await waiting(tx)) === 5)
        })
        for (const res of await Promise.all(answers)) assert.equal(res.statusCode, 200)
        const built = new Set(snapshotFiles(t).map((f) => Number(path.basename(f).split('-')[0])))
        assert.deepEqual([...built].sort(), [1, 2, 3, 4], 'the fifth event got no build of its own')
      } finally {
        await locker.close()
        await t.close()
        await storage.dispose()
      }
    })
  },
)
