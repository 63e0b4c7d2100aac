import assert from 'node:assert/strict'
import { generateKeyPairSync } from 'node:crypto'
import { after, before, test } from 'node:test'
import { CompactSign, decodeProtectedHeader } from 'jose'
import { Scanner, ScannerError, type ScanResult, type SyncReport } from '../../packages/scanner/src/index.js'
import { forEachBackend, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  deviceToken,
  newTicketType,
  type PartnerKeys,
  partnerPost,
  registerReceiver,
  seedPartner,
} from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { deviceNetwork, type Network } from '../../test/helpers/scanner.js'
import { until, waitFor } from '../../test/helpers/until.js'

const TICKETS = 1_900
const REVOKED = 20
const FORGED = 100
const DOUBLE = 50
const SCANNERS = 3

const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
const claimsOf = (code: string) => JSON.parse(Buffer.from(code.split('.')[1]!, 'base64url').toString())

/**
 * The night the network fails: three scanners sync, lose the network, and are shown 2,000 ticket codes
 * (1,880 genuine, 20 revoked before the cut, 100 forged), 50 of the genuine ones at two scanners; then
 * the network returns and they sync.
 */
forEachBackend(
  httpBackends,
  'festival night: three offline scanners, 2,000 codes',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let receiver: Receiver
    const tickets: { transfer_uid: string; company_ticket_id: string; code: string }[] = []
    const scanners: { scanner: Scanner; net: Network }[] = []

    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      receiver = await startReceiver()
      await registerReceiver(t, keys.write, receiver.url)
      const ticketUid = await newTicketType(t, keys.write)
      for (let i = 0; i < TICKETS; i++) {
        const res = await partnerPost(t, '/companies/transfer', keys.write, {
          event_uid: 'summer-fest-2026',
          email: `fan${i % 400}@example.com`,
          ticket_uid: ticketUid,
          company_ticket_id: `night-${i}`,
        })
        assert.equal(res.statusCode, 201, res.body)
        const { transfer_uid, company_ticket_id, ticket_code } = res.json()
        tickets.push({ transfer_uid, company_ticket_id, code: ticket_code })
      }
      for (let i = 0; i < SCANNERS; i++) {
        const net = deviceNetwork(t)
        const scanner = new Scanner({
          baseUrl: 'http://wristband.test',
          eventId: 1,
          token: deviceToken(t, 1, 1),
          gate: `Gate ${i + 1}`,
          now: () => t.clock.now(),
          fetch: net.fetch,
        })
        scanners.push({ scanner, net })
      }
    })
    after(() => receiver.close())

    test('forged codes are refused offline, revoked ones too, every ticket is used once, one webhook per use', async () => {
      for (const { scanner } of scanners) {
        const first = await scanner.sync()
        assert.equal(first.changes, TICKETS)
        assert.equal(first.keysFetched, true)
      }
      // 20 tickets are re-issued (lost phones) while the network still works; the scanners learn of it.
      const revoked = tickets.slice(0, REVOKED)
      for (const r of revoked) {
        const res = await partnerPost(
          t,
          `/companies/transfer/${r.company_ticket_id}/reissue`,
          keys.write,
          undefined,
        )
        assert.equal(res.statusCode, 200, res.body)
      }
      for (const { scanner } of scanners) {
        const delta = await scanner.sync()
        assert.equal(delta.changes, REVOKED)
        assert.equal(delta.keysFetched, false)
      }

      // Forged codes: signed by an attacker's key under the service's kid, under a kid of its own, and
      // genuine signatures over altered payloads; half of them name real tickets.
      const kid = decodeProtectedHeader(tickets[0]!.code).kid!
      const attacker = generateKeyPairSync('ed25519').privateKey
      const forged: string[] = []
      for (let i = 0; i < FORGED; i++) {
        const victim = tickets[REVOKED + i]!
        const claims = { ...claimsOf(victim.code), ...(i % 2 ? { t: `${i}`.padStart(32, 'f') } : {}) }
        if (i % 3 === 2) {
          const [, , signature] = tickets[REVOKED + FORGED + i]!.code.split('.')
          forged.push(`${encode({ alg: 'EdDSA', kid })}.${encode({ ...claims, n: 7 })}.${signature}`)
        } else {
          forged.push(
            await new CompactSign(Buffer.from(JSON.stringify(claims)))
              .setProtectedHeader({ alg: 'EdDSA', kid: i % 3 === 0 ? kid : 'attacker-01' })
              .sign(attacker),
          )
        }
      }

      // The cut.
      for (const { net } of scanners) net.online = false
      const genuine = tickets.slice(REVOKED)
      const presented: { code: string; kind: 'genuine' | 'revoked' | 'forged'; at: number }[] = [
        ...genuine.map((g, i) => ({ code: g.code, kind: 'genuine' as const, at: i % SCANNERS })),
        ...revoked.map((r, i) => ({ code: r.code, kind: 'revoked' as const, at: i % SCANNERS })),
        ...forged.map((code, i) => ({ code, kind: 'forged' as const, at: i % SCANNERS })),
      ]
      assert.equal(presented.length, 2_000)
      // 50 genuine codes are shown again at another scanner (a screenshot passed over the fence).
      const doubles = genuine
        .slice(0, DOUBLE)
        .map((g, i) => ({ code: g.code, kind: 'genuine' as const, at: (i + 1) % SCANNERS }))
      const outcomes = new Map<string, ScanResult[]>()
      for (const p of [...presented, ...doubles]) {
        const r = await scanners[p.at]!.scanner.scan(p.code)
        if (p.kind === 'forged') assert.equal(r.status, 'FORGED', `forged code ${p.code} was ${r.status}`)
        if (p.kind === 'revoked') assert.equal(r.status, 'REVOKED')
        // Offline a scanner cannot know what another scanner saw: both presentations pass at the gate.
        if (p.kind === 'genuine') assert.equal(r.status, 'VALID')
        if (r.status === 'VALID') outcomes.set(r.transfer_uid, [...(outcomes.get(r.transfer_uid) ?? []), r])
      }
      // Shown twice at the same scanner, a code is ALREADY_USED there at once, with when and where.
      const repeat = await scanners[0]!.scanner.scan(genuine[0]!.code)
      assert.equal(repeat.status, 'ALREADY_USED')
      assert.equal(repeat.status === 'ALREADY_USED' && repeat.gate, 'Gate 1')
      for (const { net } of scanners) assert.equal(net.refused, 0, 'scan() never touched the network')
      // The service has check-in lists (every event its default list), so the refusals are queued too,
      // for its scan log: the revoked codes and the repeat.
      assert.equal(
        scanners.reduce((n, s) => n + s.scanner.pending, 0),
        genuine.length + DOUBLE + REVOKED + 1,
      )

      // The network returns.
      for (const { net } of scanners) net.online = true
      const reports: SyncReport[] = []
      for (const { scanner } of scanners) reports.push(await scanner.sync())
      const used = reports.flatMap((r) => r.used)
      const conflicts = reports.flatMap((r) => r.conflicts)
      assert.equal(used.length, genuine.length)
      assert.equal(new Set(used).size, genuine.length)
      assert.deepEqual(
        new Set(conflicts.map((c) => c.transfer_uid)),
        new Set(doubles.map((d) => claimsOf(d.code).t)),
      )
      assert.equal(conflicts.length, DOUBLE)
      for (const r of reports) assert.deepEqual(r.rejected, [])
      // Every double presentation: one USED, one ALREADY_USED carrying the first use's time.
      for (const d of doubles) {
        const uid = claimsOf(d.code).t
        assert.equal(used.filter((u) => u === uid).length, 1)
        const c = conflicts.filter((x) => x.transfer_uid === uid)
        assert.equal(c.length, 1)
        assert.match(c[0]!.used_at!, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
      }
      for (const { scanner } of scanners) assert.equal(scanner.pending, 0)

      // The database: every genuine ticket used exactly once, the revoked ones not at all.
      const rows = await t.db.db
        .selectFrom('transfers')
        .select(['uid', 'status', 'used_timestamp'])
        .where('event_id', '=', 1)
        .execute()
      const byUid = new Map(rows.map((r) => [r.uid, r]))
      for (const g of genuine) assert.equal(byUid.get(g.transfer_uid)?.status, 'USED')
      for (const r of revoked) assert.equal(byUid.get(r.transfer_uid)?.used_timestamp, null)
      const deliveries = await t.db.db
        .selectFrom('webhook_deliveries')
        .select(['transfer_id', (eb) => eb.fn.countAll().as('n')])
        .where('event_id', '=', 1)
        .groupBy('transfer_id')
        .execute()
      assert.equal(deliveries.length, genuine.length)
      for (const d of deliveries) assert.equal(Number(d.n), 1)
      // Deliveries are at least once: a retry after a timeout repeats a message under its webhook-id.
      // One message per use means: as many webhook-ids as uses, each naming one used ticket.
      const messages = () => {
        const byId = new Map<string, string>()
        for (const r of receiver.log)
          byId.set(String(r.headers['webhook-id']), JSON.parse(r.body).transfer_uid)
        return byId
      }
      await waitFor(() => messages().size >= genuine.length, 300_000)
      const byId = messages()
      assert.equal(byId.size, genuine.length)
      assert.deepEqual(new Set(byId.values()), new Set(genuine.map((g) => g.transfer_uid)))

      // After the sync every scanner knows every use, with when and where.
      const late = await scanners[2]!.scanner.scan(genuine[0]!.code)
      assert.equal(late.status, 'ALREADY_USED')
      assert.equal(late.status === 'ALREADY_USED' && late.source, 'service')
    })

    test('the field: wrong clocks, a stolen scanner revoked mid-night, a leaked old code, an upload 80 hours late', async () => {
      const keyOf = (devMac: string) => `wbd_festival-night-${devMac.replaceAll(':', '')}`
      const macs = ['fast', 'slow', 'jumpy', 'stolen', 'late', 'old-sync', 'new-sync'].map(
        (name, i) => [name, `FE:57:1B:A1:00:${String(i).padStart(2, '0')}`] as const,
      )
      await t.seed({
        // Each with its device key: a key-less device holds no sync:* scope.
        devices: macs.map(([, dev_mac]) => ({
          dev_mac,
          event_id: 1,
          operator_email: 'op@example.com',
          device_key: keyOf(dev_mac),
        })),
      })
      const deviceLogin = async (devMac: string) => {
        const res = await t.request({
          method: 'POST',
          url: '/auth/login/device',
          payload: { dev_mac: devMac, event_id: 1, device_key: keyOf(devMac) },
        })
        assert.equal(res.statusCode, 200, res.body)
        return res.json().offline_token as string
      }
      const HOUR = 3_600_000
      const skew: Record<string, number> = { fast: 10 * 60_000, slow: -3 * HOUR }
      const field = new Map<string, { scanner: Scanner; net: Network }>()
      const tokens = new Map<string, string>()
      for (const [name, mac] of macs) {
        const net = deviceNetwork(t)
        const fixed = await deviceLogin(mac)
        tokens.set(name, fixed)
        const scanner = new Scanner({
          baseUrl: 'http://wristband.test',
          eventId: 1,
          // The late scanner renews its token when it comes back; the others keep the one they have.
          token: name === 'late' ? () => deviceLogin(mac) : fixed,
          gate: name,
          now: () => t.clock.now() + (skew[name] ?? 0),
          fetch: net.fetch,
        })
        field.set(name, { scanner, net })
      }
      const at = (name: string) => field.get(name)!.scanner
      const ticketUid = await newTicketType(t, keys.write)
      const night: { transfer_uid: string; company_ticket_id: string; code: string }[] = []
      for (let i = 0; i < 36; i++) {
        const res = await partnerPost(t, '/companies/transfer', keys.write, {
          event_uid: 'summer-fest-2026',
          email: `field${i}@example.com`,
          ticket_uid: ticketUid,
          company_ticket_id: `field-${i}`,
        })
        assert.equal(res.statusCode, 201, res.body)
        const { transfer_uid, company_ticket_id, ticket_code } = res.json()
        night.push({ transfer_uid, company_ticket_id, code: ticket_code })
      }
      for (const [name] of macs) {
        const report = await at(name).sync()
        // The wrong clocks are corrected from the service's Date header, to within about a second.
        if (name in skew)
          assert.ok(Math.abs(report.clockOffsetMs + skew[name]!) < 60_000, `${name}: ${report.clockOffsetMs}`)
        else assert.equal(report.clockOffsetMs, 0, name)
      }
      // The holder of the last ticket reports the code leaked: it is re-issued; only one scanner learns of it.
      const leaked = night[35]!
      const reissued = await partnerPost(
        t,
        `/companies/transfer/${leaked.company_ticket_id}/reissue`,
        keys.write,
        undefined,
      )
      assert.equal(reissued.statusCode, 200, reissued.body)
      const renewed = reissued.json().ticket_code as string
      await at('new-sync').sync()

      // The cut. The jumpy scanner's clock jumps ten minutes ahead after its sync (no correction can see it).
      for (const { net } of field.values()) net.online = false
      skew.jumpy = 10 * 60_000
      const scan = async (name: string, codes: string[]) => {
        for (const code of codes) assert.equal((await at(name).scan(code)).status, 'VALID', name)
      }
      const codes = (from: number, to: number) => night.slice(from, to).map((x) => x.code)
      await scan('fast', codes(0, 10))
      await scan('slow', [...codes(10, 20), ...codes(0, 5)])
      await scan('jumpy', codes(20, 25))
      await scan('stolen', codes(25, 30))
      await scan('late', codes(30, 35))
      await scan('old-sync', [leaked.code])
      await scan('new-sync', [renewed])
      assert.equal((await at('new-sync').scan(leaked.code)).status, 'REVOKED')

      // The network returns; the stolen scanner was reported and its device archived meanwhile.
      for (const { net } of field.values()) net.online = true
      await t.seed({
        devices: [{ dev_mac: macs[3]![1], event_id: 1, operator_email: 'op@example.com', archived: true }],
      })
      // Every instance reads the revocation within REVOCATION_POLL_MS (at once when it is published).
      await until('the revocation is read', async () => !(await verifyToken(t, tokens.get('stolen')!)).valid)
      await assert.rejects(at('stolen').sync(), (err) => err instanceof ScannerError && err.status === 401)
      assert.equal(at('stolen').pending, 5, 'its scans stay on the device; none reached the service')
      const reports = new Map<string, SyncReport>()
      for (const name of ['fast', 'slow', 'jumpy', 'old-sync', 'new-sync'])
        reports.set(name, await at(name).sync())
      const uids = (from: number, to: number) => night.slice(from, to).map((x) => x.transfer_uid)
      assert.deepEqual(reports.get('fast')!.used, uids(0, 10))
      assert.deepEqual(reports.get('slow')!.used, uids(10, 20))
      assert.deepEqual(
        reports.get('slow')!.conflicts.map((c) => c.transfer_uid),
        uids(0, 5),
      )
      for (const name of ['fast', 'slow']) assert.deepEqual(reports.get(name)!.flagged, [], name)
      assert.deepEqual(reports.get('jumpy')!.used, uids(20, 25))
      assert.deepEqual(
        reports.get('jumpy')!.flagged,
        uids(20, 25).map((transfer_uid) => ({ transfer_uid, clock_adjusted: true })),
      )
      assert.deepEqual(reports.get('old-sync')!.flagged, [
        { transfer_uid: leaked.transfer_uid, revoked_code: true },
      ])
      assert.deepEqual(
        reports.get('new-sync')!.conflicts.map((c) => c.transfer_uid),
        [leaked.transfer_uid],
      )

      // An upload 80 hours late: recorded at the service's time, flagged, nothing lost.
      t.clock.advance(80 * HOUR)
      const late = await at('late').sync()
      assert.deepEqual(late.used, uids(30, 35))
      assert.deepEqual(
        late.flagged,
        uids(30, 35).map((transfer_uid) => ({ transfer_uid, clock_adjusted: true })),
      )

      const rows = await t.db.db
        .selectFrom('transfers')
        .select(['uid', 'status', 'used_at', 'used_clock_adjusted', 'used_revoked_code'])
        .where(
          'uid',
          'in',
          night.map((x) => x.transfer_uid),
        )
        .execute()
      const row = new Map(rows.map((r) => [r.uid, r]))
      for (const uid of [...uids(0, 25), ...uids(30, 36)]) assert.equal(row.get(uid)!.status, 'USED', uid)
      for (const uid of uids(25, 30))
        assert.equal(row.get(uid)!.status, 'TRANSFERRED', 'the stolen scanner used nothing')
      for (const uid of [...uids(20, 25), ...uids(30, 35)]) assert.equal(row.get(uid)!.used_clock_adjusted, 1)
      for (const uid of uids(0, 20)) assert.equal(row.get(uid)!.used_clock_adjusted, null)
      assert.equal(row.get(leaked.transfer_uid)!.used_revoked_code, 1)
      // Exactly one use notification per used ticket.
      const deliveries = await t.db.db
        .selectFrom('webhook_deliveries as d')
        .innerJoin('transfers as t', 't.id', 'd.transfer_id')
        .select(['t.uid', (eb) => eb.fn.countAll().as('n')])
        .where(
          't.uid',
          'in',
          night.map((x) => x.transfer_uid),
        )
        .groupBy('t.uid')
        .execute()
      assert.equal(deliveries.length, 31)
      for (const d of deliveries) assert.equal(Number(d.n), 1)
    })
  },
  {
    TRANSFER_EMAIL_DELAY_SECONDS: '86400',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    JOBS_POLL_MS: '20',
  },
)
