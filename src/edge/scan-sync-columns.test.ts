import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import http from 'node:http'
import { before, test } from 'node:test'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import { forEachBackend, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  deviceToken,
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'
import { FEED_PAGE_SIZE, FIRST_SYNCS_PER_DEVICE, SNAPSHOT_IDLE_MS } from './edge.service.js'

/**
 * A first sync a festival network can carry. The compact encoding (`format=columns`),
 * one snapshot per feed position shared by every scanner and compressed once, gzip/brotli for large
 * answers (not for the small ones), and a per-device limit on first syncs.
 */
forEachBackend(httpBackends, 'scan-sync: compact encoding, shared first sync, compression', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  let ticketUid: string
  let device = 100
  /** A device token of its own, so the per-device limit of one test does not touch another's. */
  const freshDevice = () => deviceToken(t, 1, 1, ++device)

  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
    ticketUid = await newTicketType(t, keys.write)
    for (let i = 0; i < 12; i++) await newTransfer(t, keys.write, ticketUid)
  })

  const get = (url: string, token: string, encoding?: string) =>
    t.request({
      method: 'GET',
      url,
      token,
      ...(encoding ? { headers: { 'accept-encoding': encoding } } : {}),
    })
  const body = (res: Awaited<ReturnType<typeof get>>) => {
    const raw = res.rawPayload
    const enc = res.headers['content-encoding']
    return JSON.parse(
      (enc === 'br' ? brotliDecompressSync(raw) : enc === 'gzip' ? gunzipSync(raw) : raw).toString(),
    )
  }

  test('the compact first sync holds every ticket once, with its digest, version and use; it ends with the feed position', async () => {
    const token = freshDevice()
    const object = body(await get('/events/1/scan-sync', token))
    const res = await get('/events/1/scan-sync?format=columns', token)
    assert.equal(res.statusCode, 200, res.body)
    const page = body(res)
    assert.equal(page.format, 'columns')
    assert.equal(page.count, object.tickets.length)
    assert.equal(page.has_more, false)
    assert.match(page.cursor, /^\d+$/)
    const byKey = new Map<string, { digest: string; version: number }>()
    for (let i = 0; i < page.count; i++)
      byKey.set(page.ids.slice(i * 16, i * 16 + 16), {
        digest: page.digests.slice(i * 22, i * 22 + 22),
        version: 1,
      })
    for (const [i, v] of page.versions) byKey.get(page.ids.slice(i * 16, i * 16 + 16))!.version = v
    for (const x of object.tickets)
      assert.deepEqual(byKey.get(x.transfer_uid.slice(0, 16)), { digest: x.digest, version: x.version })
    assert.deepEqual(page.ticket_types, [
      ...new Set(object.tickets.map((x: { ticket_uid: string }) => x.ticket_uid)),
    ])
  })

  test('first syncs share one snapshot, compressed once: the same bytes for every scanner; a delta from its position brings what changed since', async () => {
    const [a, b] = [freshDevice(), freshDevice()]
    const first = await get('/events/1/scan-sync?format=columns', a, 'gzip, deflate, br')
    const second = await get('/events/1/scan-sync?format=columns', b, 'br')
    assert.equal(first.headers['content-encoding'], 'br')
    assert.ok(first.rawPayload.equals(second.rawPayload), 'the very same compressed page')
    const gz = await get('/events/1/scan-sync?format=columns', freshDevice(), 'gzip')
    assert.equal(gz.headers['content-encoding'], 'gzip')
    const plain = await get('/events/1/scan-sync?format=columns', freshDevice())
    assert.equal(plain.headers['content-encoding'], undefined)
    assert.deepEqual(body(first), body(gz))
    assert.deepEqual(body(first), body(plain))
    // A ticket transferred and one used after the snapshot: a first sync still reuses it, and the delta
    // from its position carries both.
    const late = await newTransfer(t, keys.write, ticketUid)
    const used = await t.request({
      method: 'POST',
      url: '/tickets/use-batch',
      token: a,
      payload: {
        scans: [{ transfer_uid: late.transfer_uid, used_at: new Date(t.clock.now()).toISOString() }],
      },
    })
    assert.equal(used.json().results[0].status, 'USED')
    const again = await get('/events/1/scan-sync?format=columns', freshDevice(), 'br')
    assert.ok(again.rawPayload.equals(first.rawPayload), 'reused while the feed moved less than a page')
    const delta = body(await get(`/events/1/scan-sync?format=columns&cursor=${body(first).cursor}`, a))
    assert.equal(delta.count, 1)
    assert.equal(delta.ids, late.transfer_uid.slice(0, 16))
    assert.equal(delta.used.length, 1)
    assert.equal(delta.used[0][0], 0)
  })

  test('a first sync in several pages: snapshot cursors, then the position; pages read after the snapshot was replaced are still right', async () => {
    const token = freshDevice()
    const seen = new Set<string>()
    let cursor: string | undefined
    let pages = 0
    for (;;) {
      const page = body(
        await get(`/events/1/scan-sync?format=columns&limit=5${cursor ? `&cursor=${cursor}` : ''}`, token),
      )
      pages++
      for (let i = 0; i < page.count; i++) seen.add(page.ids.slice(i * 16, i * 16 + 16))
      cursor = page.cursor
      if (!page.has_more) break
      assert.match(cursor!, /^\d+\.\d+$/)
    }
    assert.ok(pages >= 3)
    assert.match(cursor!, /^\d+$/)
    const all = body(await get('/events/1/scan-sync', token))
    assert.equal(seen.size, all.tickets.length)
    // A snapshot cursor is for the compact encoding only.
    const wrong = await get('/events/1/scan-sync?cursor=1.2', token)
    assert.equal(wrong.statusCode, 422)
  })

  test('a snapshot no scanner asked for in ten minutes is let go: the next first sync takes a new one', async () => {
    const cursorOf = async () => body(await get('/events/1/scan-sync?format=columns', freshDevice())).cursor
    const taken = await cursorOf()
    await newTransfer(t, keys.write, ticketUid)
    assert.equal(await cursorOf(), taken, 'reused: the feed moved by one change')
    t.clock.advance(SNAPSHOT_IDLE_MS - 1000)
    assert.equal(await cursorOf(), taken, 'asked for again within the idle time: still held')
    t.clock.advance(SNAPSHOT_IDLE_MS)
    const after = await cursorOf()
    const { feed_seq } = await t.db.db
      .selectFrom('events')
      .select('feed_seq')
      .where('id', '=', 1)
      .executeTakeFirstOrThrow()
    assert.ok(Number(after) > Number(taken))
    assert.equal(after, String(feed_seq), 'a new snapshot, taken at the feed position of now')
  })

  test('a device may start only so many first syncs; deltas are not counted', async () => {
    const token = freshDevice()
    let cursor = ''
    for (let i = 0; i < FIRST_SYNCS_PER_DEVICE; i++) {
      const res = await get('/events/1/scan-sync?format=columns', token)
      assert.equal(res.statusCode, 200)
      cursor = body(res).cursor
    }
    const refused = await get('/events/1/scan-sync?format=columns', token)
    assert.equal(refused.statusCode, 429)
    assert.equal(refused.json().error, 'rate_limit_exceeded')
    assert.ok(Number(refused.headers['retry-after']) > 0)
    assert.equal((await get(`/events/1/scan-sync?format=columns&cursor=${cursor}`, token)).statusCode, 200)
    assert.equal(
      (await get('/events/1/scan-sync?format=columns', freshDevice())).statusCode,
      200,
      'another device',
    )
  })

  test('large JSON answers are compressed as accepted; small ones, and verify, are not', async () => {
    const token = freshDevice()
    const big = await get('/events/1/scan-sync', token, 'gzip')
    assert.equal(big.headers['content-encoding'], 'gzip')
    assert.ok(big.rawPayload.length < Buffer.byteLength(JSON.stringify(body(big))))
    const small = await t.request({
      method: 'POST',
      url: '/tokens/verify',
      headers: { 'accept-encoding': 'gzip, br' },
      payload: { token },
    })
    assert.equal(small.headers['content-encoding'], undefined)
    assert.equal(small.json().valid, true)
    assert.equal((await verifyToken(t, token)).valid, true)
    const reissue = await partnerPost(t, '/companies/ticket', keys.write, {
      event_uid: 'summer-fest-2026',
      name: 'Small answer',
      price: 1,
      ticket_date: '2026-07-18T12:00:00.000',
    })
    assert.equal(reissue.statusCode, 201)
    assert.equal(reissue.headers['content-encoding'], undefined)
  })

  test('a first sync of several snapshot pages, served while the snapshot is built: every ticket once, the same bytes for scanners starting together', async () => {
    // Event 2 gets two and a half snapshot pages of tickets, written as the service writes them.
    const now = t.clock.now()
    const type = await t.db.db
      .insertInto('ticket_types')
      .values({
        uid: randomBytes(16).toString('hex'),
        event_id: 2,
        name: 'Many',
        price: 1,
        ticket_date: '2026-12-18T12:00:00.000',
        created_at: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow()
    const link = await t.db.db
      .insertInto('holder_links')
      .values({ event_id: 2, email: 'many@example.com', created_at: now, updated_at: now })
      .returning('id')
      .executeTakeFirstOrThrow()
    const total = FEED_PAGE_SIZE * 2 + FEED_PAGE_SIZE / 2
    const uids = new Set<string>()
    for (let i = 0; i < total; i += 1000) {
      const rows = Array.from({ length: Math.min(1000, total - i) }, (_, j) => {
        const uid = randomBytes(16).toString('hex')
        uids.add(uid.slice(0, 16))
        return {
          uid,
          event_id: 2,
          ticket_type_id: type.id,
          company_ticket_id: `many-${i + j}`,
          email: 'many@example.com',
          link_id: link.id,
          balance: 0,
          promo_balance: 0,
          status: 'TRANSFERRED',
          created_at: now,
          code_digest: randomBytes(16).toString('base64url').slice(0, 22),
          feed_seq: i + j + 1,
        }
      })
      await t.db.db.insertInto('transfers').values(rows).execute()
    }
    await t.db.db.updateTable('events').set({ feed_seq: total }).where('id', '=', 2).execute()

    const firstSync = async (encoding: string) => {
      const token = deviceToken(t, 1, 2, ++device)
      const raw: Buffer[] = []
      const seen: string[] = []
      let cursor: string | undefined
      for (;;) {
        const res = await get(
          `/events/2/scan-sync?format=columns${cursor ? `&cursor=${cursor}` : ''}`,
          token,
          encoding,
        )
        assert.equal(res.statusCode, 200, res.body)
        const page = body(res)
        raw.push(res.rawPayload)
        for (let i = 0; i < page.count; i++) seen.push(page.ids.slice(i * 16, i * 16 + 16))
        cursor = page.cursor
        if (!page.has_more) break
        assert.match(cursor!, /^\d+\.\d+$/)
      }
      return { raw, seen, cursor }
    }
    // Three scanners at once, while the snapshot is being built: one asks for gzip, two for brotli.
    const [a, b, gz] = await Promise.all([firstSync('br'), firstSync('br'), firstSync('gzip')])
    for (const sync of [a, b, gz]) {
      assert.equal(sync.raw.length, 3)
      assert.equal(sync.seen.length, total)
      assert.deepEqual(new Set(sync.seen), uids)
      assert.equal(sync.cursor, String(total))
    }
    for (const [i, page] of a.raw.entries())
      assert.ok(page.equals(b.raw[i]!), `page ${i}: one snapshot for both`)
  })

  test('pages sent over sockets from the buffers the instance reuses: four scanners at once, in three encodings, each get the bytes of their pages', async () => {
    // Event 2's snapshot of the test before, three pages: its pages as one scanner gets them alone.
    await t.app.listen({ host: '127.0.0.1', port: 0 })
    const { port } = t.app.server.address() as { port: number }
    const overSocket = (url: string, token: string, encoding: string) =>
      new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
        const req = http.get(
          {
            host: '127.0.0.1',
            port,
            path: url,
            headers: { authorization: `Bearer ${token}`, 'accept-encoding': encoding },
          },
          (res) => {
            const chunks: Buffer[] = []
            // A scanner on a slow network: the page stays in the socket's way while others are read.
            res.pause()
            setTimeout(() => res.resume(), 30)
            res.on('data', (chunk: Buffer) => chunks.push(chunk))
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }))
            res.on('error', reject)
          },
        )
        req.on('error', reject)
      })
    const firstSync = async (encoding: string, send: typeof overSocket) => {
      const token = deviceToken(t, 1, 2, ++device)
      const raw: Buffer[] = []
      let cursor: string | undefined
      for (;;) {
        const res = await send(
          `/events/2/scan-sync?format=columns${cursor ? `&cursor=${cursor}` : ''}`,
          token,
          encoding,
        )
        assert.equal(res.status, 200, res.body.toString())
        raw.push(res.body)
        const page = body({
          rawPayload: res.body,
          headers: { 'content-encoding': encoding === 'identity' ? undefined : encoding },
        } as Awaited<ReturnType<typeof get>>)
        cursor = page.cursor
        if (!page.has_more) return raw
      }
    }
    const injected = async (url: string, token: string, encoding: string) => {
      const res = await get(url, token, encoding)
      return { status: res.statusCode, body: res.rawPayload }
    }
    const encodings = ['identity', 'br', 'gzip', 'identity']
    const alone = await Promise.all(encodings.map((e) => firstSync(e, injected)))
    for (let round = 0; round < 3; round++) {
      const together = await Promise.all(encodings.map((e) => firstSync(e, overSocket)))
      for (const [k, raw] of together.entries()) {
        assert.equal(raw.length, alone[k]!.length)
        for (const [i, page] of raw.entries())
          assert.ok(page.equals(alone[k]![i]!), `round ${round}, scanner ${k} (${encodings[k]}), page ${i}`)
      }
    }
  })
})
