import assert from 'node:assert/strict'
import { createPrivateKey, generateKeyPairSync } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { CompactSign, decodeProtectedHeader } from 'jose'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { dashboardSession } from '../../test/helpers/dashboard.js'
import {
  deviceToken,
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerPost,
  registerReceiver,
  seedPartner,
} from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { MAX_SCANNED_CODE } from './scanned-code.js'

/**
 * The gate audit (2026-11-25 decisions, "The gate"), findings F2-F4: an offline scan may carry the code
 * itself; a scan cannot be dated before the code the device held existed; a code version never issued is
 * flagged. In every case the person who got in is counted, and no scan fails the batch.
 */
type Ticket = { transfer_uid: string; company_ticket_id: string; ticket_code: string }
type Result = { transfer_uid: string; status: string; used_at?: string } & Record<string, unknown>

const HOUR = 3_600_000
const FLAGS = ['clock_adjusted', 'revoked_code', 'unknown_code'] as const

/** A result's status and the flags it carries, e.g. ['USED', 'revoked_code']. */
const flagsOf = (r: Result) => [r.status, ...FLAGS.filter((f) => r[f] === true)]

forEachBackend(
  httpBackends,
  'offline scans of codes the service never issued, or before they existed',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let ticketUid: string
    let receiver: Receiver
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      receiver = await startReceiver()
      await registerReceiver(t, keys.write, receiver.url)
      ticketUid = await newTicketType(t, keys.write)
    })
    after(() => receiver.close())

    const transfer = async () => (await newTransfer(t, keys.write, ticketUid)) as Ticket
    const reissue = async (m: Ticket) => {
      const res = await partnerPost(
        t,
        `/companies/transfer/${m.company_ticket_id}/reissue`,
        keys.write,
        undefined,
      )
      assert.equal(res.statusCode, 200, res.body)
      return res.json().ticket_code as string
    }
    const batch = (scans: Record<string, unknown>[]) =>
      t.request({
        method: 'POST',
        url: '/tickets/use-batch',
        token: deviceToken(t, 1, 1),
        payload: { scans },
      })
    const results = async (scans: Record<string, unknown>[]) => {
      const res = await batch(scans)
      assert.equal(res.statusCode, 200, res.body)
      return res.json().results as Result[]
    }
    const rows = async (tickets: Ticket[]) => {
      const found = await t.db.db
        .selectFrom('transfers')
        .select(['uid', 'status', 'used_at', 'used_clock_adjusted', 'used_revoked_code', 'used_unknown_code'])
        .where(
          'uid',
          'in',
          tickets.map((x) => x.transfer_uid),
        )
        .execute()
      const byUid = new Map(found.map((r) => [r.uid, r]))
      return tickets.map((x) => byUid.get(x.transfer_uid)!)
    }
    /** The dashboard's list of uses of re-issued or unknown codes, as the event's staff see it, as text. */
    const flaggedList = async () => {
      const session = await dashboardSession(t, 'root@example.com')
      const page = await t.request({
        method: 'GET',
        url: '/dashboard/events/1',
        cookies: { wb_session: session },
      })
      assert.equal(page.statusCode, 200)
      const section = page.body.slice(page.body.indexOf('data-flagged-code-uses'))
      return section.slice(0, section.indexOf('</section>'))
    }
    const rowOf = (list: string, m: Ticket) => {
      const at = list.indexOf(m.company_ticket_id)
      return at < 0 ? undefined : list.slice(list.lastIndexOf('<tr>', at), list.indexOf('</tr>', at))
    }

    test('F2: a scan may carry the code itself; its version counts, and a code that does not verify as the ticket’s counts flagged unknown_code without failing the batch', async () => {
      const [a, b, c, d, e, f, g, h] = (await Promise.all(Array.from({ length: 8 }, transfer))) as Ticket[]
      const aOld = a!.ticket_code
      const aNew = await reissue(a!)
      const { kid } = decodeProtectedHeader(c!.ticket_code)
      const claimsOf = (code: string) => Buffer.from(code.split('.')[1]!, 'base64url')
      // A code of c with the right header, signed with a key that is not the service's.
      const forged = await new CompactSign(claimsOf(c!.ticket_code))
        .setProtectedHeader({ alg: 'EdDSA', kid, typ: 'wb-ticket' })
        .sign(generateKeyPairSync('ed25519').privateKey)
      // d's code with one signature character changed.
      const [dh, dp, ds] = d!.ticket_code.split('.') as [string, string, string]
      const tampered = `${dh}.${dp}.${ds.slice(0, 10)}${ds[10] === 'A' ? 'B' : 'A'}${ds.slice(11)}`
      // f's claims signed with the edge key itself, typed as an offline token: not a code.
      const edgeKey = createPrivateKey(fs.readFileSync(path.join(t.config.DATA_DIR, 'edge-key.pem'), 'utf8'))
      const tokenTyped = await new CompactSign(claimsOf(f!.ticket_code))
        .setProtectedHeader({ alg: 'EdDSA', kid, typ: 'wb-offline+jwt' })
        .sign(edgeKey)
      const now = new Date(t.clock.now()).toISOString()
      const scan = (m: Ticket, extra: Record<string, unknown>) => ({
        transfer_uid: m.transfer_uid,
        used_at: now,
        ...extra,
      })
      const got = await results([
        scan(b!, { code: b!.ticket_code }),
        scan(a!, { code: aOld }),
        scan(c!, { code: forged }),
        scan(d!, { code: tampered }),
        scan(e!, { code: b!.ticket_code }),
        scan(f!, { code: tokenTyped }),
        scan(g!, { code: 'not a code' }),
        // The signed version wins over the device's word.
        scan(h!, { code: h!.ticket_code, version: 99 }),
        scan(a!, { code: aNew }),
      ])
      assert.deepEqual(got.map(flagsOf), [
        ['USED'],
        ['USED', 'revoked_code'],
        ['USED', 'unknown_code'],
        ['USED', 'unknown_code'],
        ['USED', 'unknown_code'],
        ['USED', 'unknown_code'],
        ['USED', 'unknown_code'],
        ['USED'],
        ['ALREADY_USED'],
      ])
      const stored = await rows([a!, b!, c!, d!, e!, f!, g!, h!])
      assert.deepEqual(
        stored.map((r) => [r.status, r.used_revoked_code, r.used_unknown_code]),
        [
          ['USED', 1, null],
          ['USED', null, null],
          ['USED', null, 1],
          ['USED', null, 1],
          ['USED', null, 1],
          ['USED', null, 1],
          ['USED', null, 1],
          ['USED', null, null],
        ],
      )
      const list = await flaggedList()
      assert.match(rowOf(list, a!) ?? '', /re-issued/)
      for (const m of [c!, d!, e!, f!, g!]) assert.match(rowOf(list, m) ?? '', /unknown/, m.company_ticket_id)
      for (const m of [b!, h!]) assert.equal(rowOf(list, m), undefined)

      // The code is bounded: a longer one is bad input, refused with its place.
      const long = await batch([scan(b!, { code: 'x'.repeat(MAX_SCANNED_CODE + 1) })])
      assert.equal(long.statusCode, 422)
      assert.deepEqual(long.json().detail[0].loc, ['body', 'scans', 0, 'code'])
    })

    test('F3: a scan dated before the ticket (or the carried code’s version) existed is recorded at the service’s time, clock_adjusted, the claimed time audited, the webhook as for any use', async (tc) => {
      t.clock.freeze()
      tc.after(() => t.clock.thaw())
      const created = t.clock.now()
      const [x, y, z, w, v] = (await Promise.all(Array.from({ length: 5 }, transfer))) as Ticket[]
      // Two hours later y and z are re-issued: their version 2 exists from then on.
      t.clock.advance(2 * HOUR)
      const now = t.clock.now()
      const yNew = await reissue(y!)
      await reissue(z!)
      const iso = (ms: number) => new Date(ms).toISOString()
      const claimed = [
        iso(created - 60 * HOUR),
        iso(created + HOUR),
        iso(created + HOUR),
        iso(created + HOUR / 2),
        iso(created - 2 * 60_000),
      ]
      const got = await results([
        // Inside the window, 60 hours before the ticket was created.
        { transfer_uid: x!.transfer_uid, used_at: claimed[0] },
        // The new code, scanned an hour before it was issued.
        { transfer_uid: y!.transfer_uid, used_at: claimed[1], code: yNew },
        // The old code, scanned an hour before the re-issue: it existed then, so the time is kept.
        { transfer_uid: z!.transfer_uid, used_at: claimed[2], version: 1 },
        { transfer_uid: w!.transfer_uid, used_at: claimed[3] },
        // Two minutes before the ticket existed: a clock error the window allows for (5 minutes), kept
        // at the ticket's creation, unflagged, never before it.
        { transfer_uid: v!.transfer_uid, used_at: claimed[4] },
      ])
      assert.deepEqual(
        got.map((r) => [...flagsOf(r), r.used_at]),
        [
          ['USED', 'clock_adjusted', iso(now)],
          ['USED', 'clock_adjusted', iso(now)],
          ['USED', 'revoked_code', claimed[2]],
          ['USED', claimed[3]],
          ['USED', iso(created)],
        ],
      )
      const stored = await rows([x!, y!, z!, w!, v!])
      assert.deepEqual(
        stored.map((r) => [Number(r.used_at), r.used_clock_adjusted]),
        [
          [now, 1],
          [now, 1],
          [Date.parse(claimed[2]!), null],
          [Date.parse(claimed[3]!), null],
          [created, null],
        ],
      )
      for (const r of stored) assert.ok(Number(r.used_at) >= created, 'nothing used before it existed')
      // The device's claimed time is kept in the audit record, with why it was not taken.
      const audit = await t.db.db
        .selectFrom('audit_log')
        .select('detail')
        .where('kind', '=', 'ticket_use_clock_adjusted')
        .execute()
      const details = audit
        .map((a) => JSON.parse(a.detail!))
        .filter((d) => [x!.transfer_uid, y!.transfer_uid].includes(d.transfer_uid))
        .map((d) => [d.transfer_uid, d.claimed_used_at, d.recorded_used_at, d.reason])
        .sort()
      assert.deepEqual(
        details,
        [
          [x!.transfer_uid, claimed[0], iso(now), 'before_code_existed'],
          [y!.transfer_uid, claimed[1], iso(now), 'before_code_existed'],
        ].sort(),
      )
      // The webhook goes out as for any use, with the recorded time.
      const deliveries = await t.db.db
        .selectFrom('webhook_deliveries as d')
        .innerJoin('transfers as t', 't.id', 'd.transfer_id')
        .select(['t.uid', 'd.payload'])
        .where('t.uid', 'in', [x!.transfer_uid, y!.transfer_uid])
        .execute()
      assert.deepEqual(
        deliveries.map((d) => [d.uid, JSON.parse(d.payload).used_at]).sort(),
        [
          [x!.transfer_uid, iso(now)],
          [y!.transfer_uid, iso(now)],
        ].sort(),
      )
    })

    test('F4: a code version never issued counts, flagged unknown_code in the result, the use record and the dashboard', async () => {
      const [m, n, p, q] = (await Promise.all(Array.from({ length: 4 }, transfer))) as Ticket[]
      await reissue(p!)
      await reissue(q!)
      const now = new Date(t.clock.now()).toISOString()
      const got = await results([
        { transfer_uid: m!.transfer_uid, used_at: now, version: 99 },
        { transfer_uid: m!.transfer_uid, used_at: now, version: 99 },
        { transfer_uid: n!.transfer_uid, used_at: now, version: 1 },
        { transfer_uid: p!.transfer_uid, used_at: now, version: 2 },
        { transfer_uid: q!.transfer_uid, used_at: now, version: 3 },
      ])
      assert.deepEqual(got.map(flagsOf), [
        ['USED', 'unknown_code'],
        ['ALREADY_USED', 'unknown_code'],
        ['USED'],
        ['USED'],
        ['USED', 'unknown_code'],
      ])
      const stored = await rows([m!, n!, p!, q!])
      assert.deepEqual(
        stored.map((r) => [r.status, r.used_revoked_code, r.used_unknown_code]),
        [
          ['USED', null, 1],
          ['USED', null, null],
          ['USED', null, null],
          ['USED', null, 1],
        ],
      )
      const list = await flaggedList()
      for (const x of [m!, q!]) assert.match(rowOf(list, x) ?? '', /unknown/, x.company_ticket_id)
      for (const x of [n!, p!]) assert.equal(rowOf(list, x), undefined)
      // One use notification each, as for any use.
      const deliveries = await t.db.db
        .selectFrom('webhook_deliveries as d')
        .innerJoin('transfers as t', 't.id', 'd.transfer_id')
        .select('t.uid')
        .where('t.uid', 'in', [m!.transfer_uid, q!.transfer_uid])
        .execute()
      assert.deepEqual(deliveries.map((d) => d.uid).sort(), [m!.transfer_uid, q!.transfer_uid].sort())
    })
  },
  { WEBHOOK_ALLOW_PRIVATE: 'true' },
)
