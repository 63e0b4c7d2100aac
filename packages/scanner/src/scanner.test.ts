import assert from 'node:assert/strict'
import { createPrivateKey } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { before, test } from 'node:test'
import { CompactSign } from 'jose'
import { forEachBackend, login, type TestApp } from '../../../test/helpers/app.js'
import { httpBackends } from '../../../test/helpers/backends.js'
import {
  deviceToken,
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerGet,
  seedPartner,
} from '../../../test/helpers/partner.js'
import { deviceNetwork } from '../../../test/helpers/scanner.js'
import { DeviceSession, parseSetupCode, readTicketCode, Scanner, ScannerError, setUpDevice } from './index.js'
import { createNodeScanner } from './node.js'

forEachBackend(httpBackends, '@wristband/scanner', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  let ticketUid: string
  const codeOf = async (companyTicketId: string, key = keys.read) =>
    (await partnerGet(t, `/companies/transfer/${companyTicketId}`, key)).json().ticket_code as string
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
    ticketUid = await newTicketType(t, keys.write)
  })

  const scanner = (net = deviceNetwork(t), state?: ReturnType<Scanner['exportState']>) =>
    createNodeScanner({
      baseUrl: 'http://wristband.test',
      eventId: 1,
      token: () => deviceToken(t, 1, 1),
      gate: 'West',
      now: () => t.clock.now(),
      fetch: net.fetch,
      ...(state ? { state } : {}),
    })

  test('a code issued after the last sync is checked by its signature; a genuine code of another event is WRONG_EVENT', async () => {
    const s = scanner()
    await s.sync()
    const late = await newTransfer(t, keys.write, ticketUid)
    const r = await s.scan(await codeOf(late.company_ticket_id))
    // The service has check-in lists: the scan was on the event's default list, as an entry.
    const defaultList = s.checkinLists.find((l) => l.is_default)!.id
    assert.deepEqual(r, {
      status: 'VALID',
      transfer_uid: late.transfer_uid,
      ticket_uid: ticketUid,
      checkin_list_id: defaultList,
      direction: 'entry',
    })
    const otherType = await newTicketType(t, keys.other, 'winter-fest-2026')
    const other = await newTransfer(t, keys.other, otherType, {}, 'winter-fest-2026')
    const wrong = await s.scan(await codeOf(other.company_ticket_id, keys.other))
    assert.deepEqual(wrong, { status: 'WRONG_EVENT', transfer_uid: other.transfer_uid, event_id: 2 })
    assert.deepEqual(await s.scan('not-a-code'), { status: 'FORGED', reason: 'not a ticket code' })
  })

  test('a code past its validity window is EXPIRED', async () => {
    const s = scanner()
    await s.sync()
    const m = await newTransfer(t, keys.write, ticketUid)
    const code = await codeOf(m.company_ticket_id)
    const exp = JSON.parse(Buffer.from(code.split('.')[1]!, 'base64url').toString()).exp
    const late = createNodeScanner({
      baseUrl: 'http://wristband.test',
      eventId: 1,
      token: 'unused',
      now: () => exp * 1000 + 1,
      state: s.exportState(),
    })
    assert.deepEqual(await late.scan(code), { status: 'EXPIRED', transfer_uid: m.transfer_uid })
  })

  test('a code signed with the edge key under a version never issued scans VALID offline; the upload counts it, flagged unknown_code', async () => {
    const s = scanner()
    const m = await newTransfer(t, keys.write, ticketUid)
    await s.sync()
    const genuine = await codeOf(m.company_ticket_id)
    const [header, payload] = genuine.split('.') as [string, string]
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString())
    // The service signs only the versions it issues; version 2 of this ticket never was.
    const edgeKey = createPrivateKey(fs.readFileSync(path.join(t.config.DATA_DIR, 'edge-key.pem'), 'utf8'))
    const unissued = await new CompactSign(Buffer.from(JSON.stringify({ ...claims, n: 2 })))
      .setProtectedHeader(JSON.parse(Buffer.from(header, 'base64url').toString()))
      .sign(edgeKey)
    assert.equal((await s.scan(unissued)).status, 'VALID')
    const report = await s.sync()
    assert.deepEqual(report.used, [m.transfer_uid])
    assert.deepEqual(report.flagged, [{ transfer_uid: m.transfer_uid, unknown_code: true }])
  })

  test('without the network sync() throws and keeps the queue; a restart from the saved state loses nothing', async () => {
    const net = deviceNetwork(t)
    const first = scanner(net)
    await first.sync()
    const m = await newTransfer(t, keys.write, ticketUid)
    const code = await codeOf(m.company_ticket_id)
    await first.sync()
    net.online = false
    assert.equal((await first.scan(code)).status, 'VALID')
    await assert.rejects(first.sync(), (err) => {
      assert.ok(err instanceof ScannerError)
      assert.equal(err.name, 'ScannerError')
      assert.match(String(err), /^ScannerError: network unreachable/)
      return true
    })
    assert.equal(first.pending, 1)
    // The device restarts (still offline) from its saved state, as JSON.
    const saved = JSON.parse(JSON.stringify(first.exportState()))
    const second = scanner(net, saved)
    const again = await second.scan(code)
    assert.equal(again.status, 'ALREADY_USED')
    assert.equal(again.status === 'ALREADY_USED' && again.source, 'device')
    assert.equal(again.status === 'ALREADY_USED' && again.gate, 'West')
    net.online = true
    const report = await second.sync()
    assert.deepEqual(report.used, [m.transfer_uid])
    assert.equal(second.pending, 0)
    const row = await t.db.db
      .selectFrom('transfers')
      .select(['status', 'used_gate'])
      .where('uid', '=', m.transfer_uid)
      .executeTakeFirstOrThrow()
    assert.deepEqual(row, { status: 'USED', used_gate: 'West' })
  })

  test('non-ASCII claims and gates are read as written (UTF-8): a code carrying "Bühne Süd", a scan at gate "Bühne Süd" seen by another scanner', async () => {
    const m = await newTransfer(t, keys.write, ticketUid)
    const genuine = await codeOf(m.company_ticket_id)
    const [header, payload] = genuine.split('.') as [string, string]
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString())
    // A code the edge key signed with a claim beyond the usual ones (the service may add such claims).
    const edgeKey = createPrivateKey(fs.readFileSync(path.join(t.config.DATA_DIR, 'edge-key.pem'), 'utf8'))
    const named = await new CompactSign(Buffer.from(JSON.stringify({ ...claims, gate: 'Bühne Süd' })))
      .setProtectedHeader(JSON.parse(Buffer.from(header, 'base64url').toString()))
      .sign(edgeKey)
    assert.equal(readTicketCode(named)?.gate, 'Bühne Süd')
    assert.equal(readTicketCode(named)?.t, m.transfer_uid)
    const south = createNodeScanner({
      baseUrl: 'http://wristband.test',
      eventId: 1,
      token: () => deviceToken(t, 1, 1),
      gate: 'Bühne Süd',
      now: () => t.clock.now(),
      fetch: deviceNetwork(t).fetch,
    })
    await south.sync()
    assert.equal((await south.scan(named)).status, 'VALID')
    assert.deepEqual((await south.sync()).used, [m.transfer_uid])
    const north = scanner()
    await north.sync()
    const seen = await north.scan(genuine)
    assert.equal(seen.status === 'ALREADY_USED' && seen.gate, 'Bühne Süd')
  })

  test('a scanner set up from its QR code: exchanges the code once, signs in with the device key, syncs and scans', async () => {
    const seeded = await t.seed({
      devices: [{ dev_mac: 'AA:BB:CC:DD:EE:31', event_id: 1, operator_email: 'op@example.com' }],
    })
    const deviceId = seeded.devices![0]!.id!
    const admin = (await login(t, 'root@example.com')).access_token
    const made = await t.request({ method: 'POST', url: `/devices/${deviceId}/setup-code`, token: admin })
    assert.equal(made.statusCode, 200, made.body)
    const { setup_url, code } = made.json()
    const net = deviceNetwork(t)
    // What the camera reads is the address; the code alone works with the service's address.
    assert.deepEqual(parseSetupCode(setup_url), { baseUrl: t.config.PUBLIC_BASE_URL, code })
    const credentials = await setUpDevice(setup_url, { fetch: net.fetch })
    assert.equal(credentials.device_id, deviceId)
    assert.equal(credentials.baseUrl, t.config.PUBLIC_BASE_URL)
    await assert.rejects(setUpDevice(code, { baseUrl: credentials.baseUrl, fetch: net.fetch }), (err) => {
      assert.ok(err instanceof ScannerError)
      assert.equal(err.status, 404)
      return true
    })
    const session = new DeviceSession(credentials, { fetch: net.fetch, now: () => t.clock.now() })
    const s = createNodeScanner({
      baseUrl: credentials.baseUrl,
      eventId: credentials.event_id,
      token: () => session.token(),
      now: () => t.clock.now(),
      fetch: net.fetch,
    })
    const m = await newTransfer(t, keys.write, ticketUid)
    await s.sync()
    assert.equal((await s.scan(await codeOf(m.company_ticket_id))).status, 'VALID')
    assert.deepEqual((await s.sync()).used, [m.transfer_uid])
  })

  test('the browser build (WebCrypto digest) answers as the Node one', async () => {
    const net = deviceNetwork(t)
    const web = new Scanner({
      baseUrl: 'http://wristband.test',
      eventId: 1,
      token: deviceToken(t, 1, 1),
      now: () => t.clock.now(),
      fetch: net.fetch,
    })
    const m = await newTransfer(t, keys.write, ticketUid)
    await web.sync()
    assert.equal(web.known > 0, true)
    assert.equal((await web.scan(await codeOf(m.company_ticket_id))).status, 'VALID')
  })
})

test('a gate the service would refuse is refused when the scanner is set up, not at every upload', () => {
  const base = { baseUrl: 'http://127.0.0.1:1', eventId: 1, token: 't' }
  for (const gate of ['', 'x'.repeat(101), 'North\u0000'])
    assert.throws(
      () => new Scanner({ ...base, gate }),
      /gate must be 1 to 100 characters/,
      JSON.stringify(gate),
    )
  for (const gate of ['North', '🎪'.repeat(100)]) assert.ok(new Scanner({ ...base, gate }))
})
