import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { Scanner } from '../../packages/scanner/src/index.js'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { CHECKIN_CHECKPOINTS, CHECKIN_SCANS } from '../../test/helpers/checkin-cases.js'
import {
  checkinOutcome,
  type Festival,
  setLocalTime,
  setUpFestival,
  festivalCounts as statuses,
} from '../../test/helpers/festival.js'
import { deviceToken, seedPartner } from '../../test/helpers/partner.js'
import { deviceNetwork, type Network } from '../../test/helpers/scanner.js'

/**
 * The case table offline: a Node scanner syncs the festival's tickets and lists, loses the network and
 * decides every scan alone with the same rule module as the service; it uploads at each checkpoint of the
 * table (Friday night, Saturday 04:30, Monday), and the service's counts are then the table's. An upload
 * sent again (its answer lost) counts nothing twice.
 */
forEachBackend(
  httpBackends,
  'check-in lists: the case table offline (Node scanner)',
  (ctx) => {
    let t: TestApp
    let f: Festival
    let net: Network
    let scanner: Scanner
    /** The bodies of the uploads the scanner sent, and the results the service answered. */
    const uploads: string[] = []
    const answered: unknown[] = []
    before(async () => {
      t = ctx()
      const keys = await seedPartner(t)
      f = await setUpFestival(t, keys.write)
      net = deviceNetwork(t)
      scanner = new Scanner({
        baseUrl: 'http://wristband.test',
        eventId: 1,
        token: () => deviceToken(t, 1, 1),
        gate: 'Scanner 1',
        now: () => t.clock.now(),
        fetch: (async (input: string | URL | Request, init?: RequestInit) => {
          if (String(input).endsWith('/tickets/use-batch') && net.online) uploads.push(String(init?.body))
          // Every answer dated by the service's (test) clock, as a real server's are by its own: the key
          // set's answer would otherwise carry today's date, months before the festival's clock.
          const res = await net.fetch(input, init)
          if (String(input).endsWith('/tickets/use-batch') && res.ok)
            answered.push(...((await res.clone().json()) as { results: unknown[] }).results)
          const headers = new Headers(res.headers)
          headers.set('date', new Date(t.clock.now()).toUTCString())
          return new Response(res.body, { status: res.status, headers })
        }) as typeof fetch,
      })
    })

    test('the same answer for every case offline as online; the counts at each checkpoint after the uploads', async () => {
      await scanner.sync()
      assert.deepEqual(
        scanner.checkinLists.map((l) => l.id).sort(),
        Object.values(f.lists).sort(),
        'the feed carried every list',
      )
      const used = new Set<string>()
      const checkpoints = [...CHECKIN_CHECKPOINTS]
      const upload = async (at: string) => {
        setLocalTime(t, at)
        net.online = true
        const report = await scanner.sync()
        net.online = false
        assert.deepEqual(report.conflicts, [], at)
        assert.deepEqual(report.rejected, [], at)
        for (const uid of report.used) used.add(uid)
      }
      net.online = false
      for (const s of CHECKIN_SCANS) {
        while (checkpoints.length && checkpoints[0]!.at < s.at) {
          const c = checkpoints.shift()!
          await upload(c.at)
          assert.deepEqual(await statuses(t, f), c.counts, `counts at ${c.at}`)
        }
        setLocalTime(t, s.at)
        const r = await scanner.scan(f.tickets[s.ticket].code, {
          ...(s.list === 'default' ? {} : { listId: f.lists[s.list] }),
          direction: s.direction,
        })
        assert.equal(checkinOutcome(r), s.expect, `${s.at} ${s.ticket} ${s.direction} ${s.list}`)
      }
      for (const c of checkpoints) {
        await upload(c.at)
        assert.deepEqual(await statuses(t, f), c.counts, `counts at ${c.at}`)
      }
      const firstUses = CHECKIN_SCANS.filter((s) => s.first_use).map((s) => f.tickets[s.ticket].transfer_uid)
      assert.deepEqual([...used].sort(), firstUses.sort(), 'each ticket used once, by its first entry')
      const log = await t.request({
        method: 'GET',
        url: '/events/1/checkins?limit=500',
        token: await f.admin(),
      })
      assert.equal(
        log.json().checkins.length,
        CHECKIN_SCANS.length,
        'every scan in the log, refused ones too',
      )
      for (const c of log.json().checkins) assert.equal(c.offline, true)
    })

    test('uploads sent again under their nonces are answered as before and count nothing twice', async () => {
      assert.ok(uploads.length >= 3)
      const before = await statuses(t, f)
      const again: unknown[] = []
      for (const body of uploads) {
        const res = await t.request({
          method: 'POST',
          url: '/tickets/use-batch',
          token: deviceToken(t, 1, 1),
          payload: JSON.parse(body),
        })
        assert.equal(res.statusCode, 200, res.body)
        again.push(...res.json().results)
      }
      assert.deepEqual(again, answered, 'the same answers')
      assert.deepEqual(await statuses(t, f), before)
      const log = await t.request({
        method: 'GET',
        url: '/events/1/checkins?limit=500',
        token: await f.admin(),
      })
      assert.equal(log.json().checkins.length, CHECKIN_SCANS.length)
      const scans = uploads.flatMap((b) => JSON.parse(b).scans as Record<string, unknown>[])
      assert.equal(scans.length, CHECKIN_SCANS.length)
      for (const s of scans) assert.match(String(s.nonce), /^[A-Za-z0-9_-]{22}$/)
    })
  },
  { OFFLINE_TOKEN_EXPIRE_HOURS: '72' },
)
