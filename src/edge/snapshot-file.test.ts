import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  deviceToken,
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'
import { feedPosition } from '../events/events.store.js'
import { type PageExtent, writeSnapshot } from './snapshot-file.js'

/**
 * A snapshot's pages are read another way than a page read from the database when the snapshot is gone
 * (PostgreSQL gathers each page into a few strings; SQLite reads the rows without their ticket type):
 * every page must be the one the service answers for the same cursor, whatever the tickets hold
 * (several ticket types, re-issued codes, uses with and without a gate, gates whose names need escaping,
 * a ticket without a code).
 */
forEachBackend(httpBackends, "a snapshot's pages are the pages the feed answers", (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  const GATES = ['North', 'Tor "Süd", Eingang 3; links', '北門', 'North']

  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
    const types = [await newTicketType(t, keys.write), await newTicketType(t, keys.write)]
    const made: { transfer_uid: string; company_ticket_id: string }[] = []
    for (let i = 0; i < 11; i++) made.push(await newTransfer(t, keys.write, types[i % 3 === 2 ? 1 : 0]!))
    // A third type whose first ticket comes late: its index in a page is where it first appears there.
    made.push(await newTransfer(t, keys.write, await newTicketType(t, keys.write)))
    made.push(await newTransfer(t, keys.write, types[0]!))
    for (const m of [made[1]!, made[6]!]) {
      const res = await partnerPost(
        t,
        `/companies/transfer/${m.company_ticket_id}/reissue`,
        keys.write,
        undefined,
      )
      assert.equal(res.statusCode, 200, res.body)
    }
    const scanner = deviceToken(t, 1, 1, 900)
    const used = await t.request({
      method: 'POST',
      url: '/tickets/use-batch',
      token: scanner,
      payload: {
        scans: [0, 3, 5, 9, 10].map((k, n) => ({
          transfer_uid: made[k]!.transfer_uid,
          used_at: new Date(t.clock.now() - n * 61_000).toISOString(),
          ...(GATES[n] ? { access_gate: GATES[n] } : {}),
        })),
      },
    })
    assert.equal(used.statusCode, 200, used.body)
    await t.db.db
      .updateTable('transfers')
      .set({ code_digest: null })
      .where('uid', '=', made[7]!.transfer_uid)
      .execute()
  })

  /** Builds the snapshot with `pause` (its answers: whether the service is busy) and compares its pages. */
  async function pagesMatch(pause: () => Promise<boolean>) {
    const token = deviceToken(t, 1, 1, 901)
    const position = (await feedPosition(t.db.db, 1))!
    const first = await t.request({
      method: 'GET',
      url: `/events/1/scan-sync?format=columns&limit=4&cursor=${position}.0`,
      token,
    })
    assert.equal(first.statusCode, 200, first.body)
    const file = path.join(t.config.DATA_DIR, `snapshot-test-${process.pid}.pages`)
    fs.writeFileSync(file, '', { mode: 0o600, flag: 'wx' })
    const pages: PageExtent[] = []
    try {
      await writeSnapshot(
        t.db,
        { eventId: 1, position, keyIds: first.json().key_ids, pageSize: 4, busyStep: 3, file },
        (page) => pages.push(page),
        pause,
      )
      const bytes = fs.readFileSync(file)
      assert.equal(pages.length, 4, '13 tickets, 4 a page')
      let used = 0
      let versions = 0
      for (const [k, page] of pages.entries()) {
        assert.equal(page.after, k === 0 ? 0 : pages[k - 1]!.next)
        const [at, length] = page.identity
        const snapshot = JSON.parse(bytes.subarray(at, at + length).toString())
        const read = await t.request({
          method: 'GET',
          url: `/events/1/scan-sync?format=columns&limit=4&cursor=${position}.${page.after}`,
          token,
        })
        assert.equal(read.statusCode, 200, read.body)
        assert.deepEqual(snapshot, read.json(), `page ${k}`)
        assert.equal(page.next === null, k === pages.length - 1)
        used += snapshot.used.length
        versions += snapshot.versions.length
      }
      assert.equal(used, 5, 'the uses are in the pages')
      assert.equal(versions, 2, 'the re-issued codes are in the pages')
    } finally {
      fs.rmSync(file, { force: true })
    }
  }

  test('every page of a snapshot, four tickets a page, equals the page read from the database for its cursor', async () => {
    let pauses = 0
    await pagesMatch(async () => {
      pauses++
      return false
    })
    // The service quiet: one ask a page, each asked while the read before it ran, so one after the last.
    assert.equal(pauses, 5)
  })

  test('so does every page a build read while the service was busy: in steps of three tickets on PostgreSQL', async () => {
    let pauses = 0
    await pagesMatch(async () => {
      pauses++
      return true
    })
    // SQLite reads a page at once; PostgreSQL reads 13 tickets, 4 a page, 3 a step: 2 steps a page, 1 for the last.
    assert.equal(pauses, t.db.dialect === 'postgres' ? 7 : 4)
  })
})
