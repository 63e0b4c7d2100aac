import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { forEachBackend, login, type TestApp, verifyToken, withStandardSeed } from '../../test/helpers/app.js'
import { backends, eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { ok, startAppWithCli, wristband } from '../../test/helpers/cli.js'
import { newTicketType, newTransfer, type PartnerKeys, seedPartner } from '../../test/helpers/partner.js'
import { until } from '../../test/helpers/until.js'
import type { SeedDocument } from '../seed/seed.js'

/**
 * A stolen scanner can be stopped. Archiving a device, rotating its key or `wristband
 * device revoke` ends every offline token issued to it (its token generation goes on the revocation list
 * every instance follows); /tokens/verify, the route guard, the scan-sync feed and use-batch refuse them.
 */
const STOLEN = 'AA:BB:CC:DD:EE:51'
const OTHER = 'AA:BB:CC:DD:EE:52'
/** The devices' keys: a device without one holds no sync:* scope (its feed and uploads are 403). */
const DEVICE_KEYS: Record<string, string> = {
  [STOLEN]: 'wbd_stolen-scanner-key-0123456789',
  [OTHER]: 'wbd_other-scanner-key-01234567890',
}
const devices = (archived = false): SeedDocument => ({
  devices: [
    {
      dev_mac: STOLEN,
      event_id: 1,
      operator_email: 'op@example.com',
      archived,
      device_key: DEVICE_KEYS[STOLEN]!,
    },
    { dev_mac: OTHER, event_id: 1, operator_email: 'op@example.com', device_key: DEVICE_KEYS[OTHER]! },
  ],
})

async function deviceLogin(t: TestApp, devMac: string, deviceKey = DEVICE_KEYS[devMac.toUpperCase()]) {
  return t.request({
    method: 'POST',
    url: '/auth/login/device',
    payload: { dev_mac: devMac, event_id: 1, ...(deviceKey ? { device_key: deviceKey } : {}) },
  })
}

async function offlineTokenOf(t: TestApp, devMac: string, deviceKey?: string): Promise<string> {
  const res = await deviceLogin(t, devMac, deviceKey)
  assert.equal(res.statusCode, 200, res.body)
  return res.json().offline_token
}

/** What the token can do at each place that checks it: verify, the feed, an upload. */
async function reach(t: TestApp, token: string, transferUid: string) {
  const feed = await t.request({ method: 'GET', url: '/events/1/scan-sync?limit=1', token })
  const upload = await t.request({
    method: 'POST',
    url: '/tickets/use-batch',
    token,
    payload: { scans: [{ transfer_uid: transferUid, used_at: new Date(t.clock.now()).toISOString() }] },
  })
  return {
    verify: (await verifyToken(t, token)).valid as boolean,
    feed: feed.statusCode,
    upload: upload.statusCode,
  }
}

const ALLOWED = { verify: true, feed: 200, upload: 200 }
const REFUSED = { verify: false, feed: 401, upload: 401 }

forEachBackend(httpBackends, 'offline tokens of an archived device', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  let ticketUid: string
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
    await t.seed(devices())
    ticketUid = await newTicketType(t, keys.write)
  })

  test("an archived device's offline token is refused at verify, scan-sync and use-batch", async () => {
    const stolen = await offlineTokenOf(t, STOLEN)
    const other = await offlineTokenOf(t, OTHER)
    const ticket = await newTransfer(t, keys.write, ticketUid)
    assert.deepEqual(await reach(t, stolen, ticket.transfer_uid), ALLOWED)

    await t.seed(devices(true))
    // The seed wrote the revocation in its transaction; the instance reads it within REVOCATION_POLL_MS.
    await until('the archived device is refused', async () => !(await verifyToken(t, stolen)).valid)
    const victim = await newTransfer(t, keys.write, ticketUid)
    assert.deepEqual(await reach(t, stolen, victim.transfer_uid), REFUSED)
    const row = await t.db.db
      .selectFrom('transfers')
      .select(['status', 'used_at'])
      .where('uid', '=', victim.transfer_uid)
      .executeTakeFirstOrThrow()
    assert.deepEqual(row, { status: 'TRANSFERRED', used_at: null }, 'the refused upload changed nothing')
    // It cannot sign in again; the other scanners carry on.
    assert.equal((await deviceLogin(t, STOLEN)).statusCode, 404)
    assert.deepEqual(await reach(t, other, victim.transfer_uid), ALLOWED)
  })

  test('an offline token an operator took for the device (POST /tokens/offline) ends with it; one taken after is good', async () => {
    await t.seed(devices())
    const id = (
      await t.db.db.selectFrom('devices').select('id').where('dev_mac', '=', STOLEN).executeTakeFirstOrThrow()
    ).id
    const operator = (await login(t, 'op@example.com', 'operator')).access_token
    const take = async () => {
      const res = await t.request({
        method: 'POST',
        url: '/tokens/offline',
        token: operator,
        payload: { event_id: 1, device_id: String(id) },
      })
      assert.equal(res.statusCode, 200, res.body)
      return res.json().offline_token as string
    }
    const before = await take()
    const device = await offlineTokenOf(t, STOLEN)
    assert.equal((await verifyToken(t, before)).valid, true)
    await t.seed(devices(true))
    await until('the tokens of the device are refused', async () => !(await verifyToken(t, before)).valid)
    assert.equal((await verifyToken(t, device)).valid, false)
    // Back in service (found again, say): tokens issued from now on are good, the old ones stay dead.
    await t.seed(devices())
    const after = await take()
    const renewed = await offlineTokenOf(t, STOLEN)
    assert.equal((await verifyToken(t, after)).valid, true)
    assert.equal((await verifyToken(t, renewed)).valid, true)
    assert.equal((await verifyToken(t, before)).valid, false)
    assert.equal((await verifyToken(t, device)).valid, false)
  })

  test('a new device key given through the seed ends the tokens issued before it', async () => {
    await t.seed(devices())
    const before = await offlineTokenOf(t, OTHER)
    await t.seed(
      withStandardSeed({
        devices: [
          {
            dev_mac: OTHER,
            event_id: 1,
            operator_email: 'op@example.com',
            device_key: 'wbd_seed-rotated-key-0123456789',
          },
        ],
      } as SeedDocument),
    )
    await until('the token is refused', async () => !(await verifyToken(t, before)).valid)
    const after = await offlineTokenOf(t, OTHER, 'wbd_seed-rotated-key-0123456789')
    assert.equal((await verifyToken(t, after)).valid, true)
  })
})

eachBackend(backends, 'wristband device revoke and rotate-key end offline tokens fleet-wide', (backend) => {
  let t: TestApp
  let env: Record<string, string>
  let keys: PartnerKeys
  let ticketUid: string
  let close = async () => {}
  before(async () => {
    ;({ t, env, close } = await startAppWithCli(backend))
    keys = await seedPartner(t)
    await t.seed(devices())
    ticketUid = await newTicketType(t, keys.write)
  })
  after(() => close())

  test('revoke --archive in another process: the running instance refuses the device token everywhere, others carry on', async () => {
    const stolen = await offlineTokenOf(t, STOLEN)
    const other = await offlineTokenOf(t, OTHER)
    ok(await wristband(['device', 'revoke', '--mac', STOLEN.toLowerCase(), '--archive'], env))
    await until('the running instance refuses the token', async () => !(await verifyToken(t, stolen)).valid)
    const ticket = await newTransfer(t, keys.write, ticketUid)
    assert.deepEqual(await reach(t, stolen, ticket.transfer_uid), REFUSED)
    assert.equal((await deviceLogin(t, STOLEN)).statusCode, 404)
    assert.deepEqual(await reach(t, other, ticket.transfer_uid), ALLOWED)
    const audit = await t.db.db
      .selectFrom('audit_log')
      .select('detail')
      .where('kind', '=', 'cli_device_revoke')
      .executeTakeFirstOrThrow()
    assert.equal(JSON.parse(audit.detail!).archived, true)
  })

  test('revoke without --archive: old tokens end, the device signs in again for a good one', async () => {
    const old = await offlineTokenOf(t, OTHER)
    ok(await wristband(['device', 'revoke', '--mac', OTHER], env))
    await until('the old token is refused', async () => !(await verifyToken(t, old)).valid)
    const renewed = await offlineTokenOf(t, OTHER)
    assert.equal((await verifyToken(t, renewed)).valid, true)
    assert.equal((await verifyToken(t, old)).valid, false)
  })

  test('rotate-key ends the tokens issued under the old key', async () => {
    const old = await offlineTokenOf(t, OTHER)
    const out = ok(await wristband(['device', 'rotate-key', '--mac', OTHER], env))
    const key = /device key \(shown only now\): (wbd_\S+)/.exec(out)![1]!
    await until('the old token is refused', async () => !(await verifyToken(t, old)).valid)
    assert.equal((await verifyToken(t, await offlineTokenOf(t, OTHER, key))).valid, true)
    const bad = await wristband(['device', 'revoke'], env)
    assert.equal(bad.code, 2)
    assert.match(bad.stderr, /give either --id or --mac/)
    assert.equal((await wristband(['device', 'revoke', '--mac', 'no:such:mac'], env)).code, 1)
  })
})
