import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, type TestApp, verifyToken, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { newTicketType, newTransfer, type PartnerKeys, seedPartner } from '../../test/helpers/partner.js'
import { until } from '../../test/helpers/until.js'
import { FIRST_SYNCS_PER_DEVICE } from '../edge/edge.service.js'
import type { SeedDocument } from '../seed/seed.js'

/**
 * POST /tokens/offline with a `device_id` binds the token to a registered device of the event: the id
 * in canonical decimal, a device that exists, is not archived and belongs to the event. The token carries
 * the device's id and token generation, so it ends with the device's own tokens (archive, key rotation,
 * revoke), and the device's first-sync budget cannot be multiplied with made-up ids.
 */
const GATE = 'AA:BB:CC:DD:EE:81'
const RETIRED = 'AA:BB:CC:DD:EE:82'
const WINTER = 'AA:BB:CC:DD:EE:83'
/** A device for the first-sync limit only (the other tests' feed reads count against theirs). */
const SYNCING = 'AA:BB:CC:DD:EE:84'
const devices = (gateArchived = false): SeedDocument => ({
  devices: [
    { dev_mac: GATE, event_id: 1, operator_email: 'op@example.com', archived: gateArchived },
    { dev_mac: RETIRED, event_id: 1, operator_email: 'op@example.com', archived: true },
    { dev_mac: WINTER, event_id: 2, operator_email: 'op2@example.com' },
    { dev_mac: SYNCING, event_id: 1, operator_email: 'op@example.com' },
  ],
})

forEachBackend(httpBackends, 'POST /tokens/offline: the device it binds to', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  let ticketUid: string
  const ids: Record<string, number> = {}
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
    await t.seed(withStandardSeed(devices()))
    for (const mac of [GATE, RETIRED, WINTER, SYNCING])
      ids[mac] = (
        await t.db.db.selectFrom('devices').select('id').where('dev_mac', '=', mac).executeTakeFirstOrThrow()
      ).id
    ticketUid = await newTicketType(t, keys.write)
  })

  const offline = (token: string, payload: object) =>
    t.request({ method: 'POST', url: '/tokens/offline', token, payload })
  const operator = async () => (await login(t, 'op@example.com', 'operator')).access_token
  /** What the token can do at each place that checks it: verify, the feed, an upload. */
  const reach = async (token: string) => {
    const { transfer_uid } = await newTransfer(t, keys.write, ticketUid)
    const feed = await t.request({ method: 'GET', url: '/events/1/scan-sync?limit=1', token })
    const upload = await t.request({
      method: 'POST',
      url: '/tickets/use-batch',
      token,
      payload: { scans: [{ transfer_uid, used_at: new Date(t.clock.now()).toISOString() }] },
    })
    return {
      verify: (await verifyToken(t, token)).valid as boolean,
      feed: feed.statusCode,
      upload: upload.statusCode,
    }
  }

  test('a device_id not in canonical decimal ("0<id>" and the like) is 422 int_parsing; the canonical one ends with the archived device, and none is issued for it after', async () => {
    const op = await operator()
    const id = ids[GATE]!
    for (const written of [
      `0${id}`,
      `00${id}`,
      `+${id}`,
      `${id}.0`,
      ` ${id}`,
      `${id} `,
      `${id}e0`,
      `0x${id.toString(16)}`,
      'POS-7',
      '-0',
    ]) {
      const res = await offline(op, { event_id: 1, device_id: written })
      assert.equal(res.statusCode, 422, `${JSON.stringify(written)}: ${res.body}`)
      assert.deepEqual(res.json().detail, [
        {
          loc: ['body', 'device_id'],
          msg: 'Input should be a valid integer, unable to parse string as an integer',
          type: 'int_parsing',
          input: written,
        },
      ])
    }
    const res = await offline(op, { event_id: 1, device_id: String(id) })
    assert.equal(res.statusCode, 200, res.body)
    const token = res.json().offline_token as string
    const claims = (await verifyToken(t, token)).claims
    assert.equal(claims.device_id, String(id))
    assert.equal(typeof claims.device_gen, 'number')
    assert.deepEqual(await reach(token), { verify: true, feed: 200, upload: 200 })

    await t.seed(devices(true))
    try {
      await until(
        'the token of the archived device is refused',
        async () => !(await verifyToken(t, token)).valid,
      )
      assert.deepEqual(await reach(token), { verify: false, feed: 401, upload: 401 })
      const after = await offline(op, { event_id: 1, device_id: String(id) })
      assert.equal(after.statusCode, 404, after.body)
      assert.equal(after.json().detail, 'No such device at this event')
    } finally {
      await t.seed(devices())
    }
    // Back in service: a token taken now is good, the ended one stays ended.
    const renewed = await offline(op, { event_id: 1, device_id: String(id) })
    assert.equal(renewed.statusCode, 200, renewed.body)
    assert.equal((await verifyToken(t, renewed.json().offline_token)).valid, true)
    assert.equal((await verifyToken(t, token)).valid, false)
  })

  test('an archived device, an unknown device and a device of another event are 404, one answer for all', async () => {
    const op = await operator()
    const root = (await login(t, 'root@example.com')).access_token
    const cases: [string, string, object][] = [
      ['archived', op, { event_id: 1, device_id: String(ids[RETIRED]) }],
      ['unknown', op, { event_id: 1, device_id: String(ids[WINTER]! + 1000) }],
      ['id 0', op, { event_id: 1, device_id: '0' }],
      ['beyond 32 bits', op, { event_id: 1, device_id: String(2 ** 31) }],
      ['beyond safe integers', op, { event_id: 1, device_id: '9'.repeat(40) }],
      ["another event's, by an operator", op, { event_id: 1, device_id: String(ids[WINTER]) }],
      [
        "another event's, by a superadmin who reaches both",
        root,
        { event_id: 1, device_id: String(ids[WINTER]) },
      ],
    ]
    for (const [what, token, payload] of cases) {
      const res = await offline(token, payload)
      if (what === 'beyond safe integers') {
        assert.equal(res.statusCode, 422, `${what}: ${res.body}`)
        assert.equal(res.json().detail[0].type, 'int_parsing')
        continue
      }
      assert.equal(res.statusCode, 404, `${what}: ${res.body}`)
      assert.equal(res.json().detail, 'No such device at this event', what)
    }
    // The same device at its own event is good.
    const own = await offline(root, { event_id: 2, device_id: String(ids[WINTER]) })
    assert.equal(own.statusCode, 200, own.body)
    assert.equal((await verifyToken(t, own.json().offline_token)).claims.device_id, String(ids[WINTER]))
  })

  test('the per-device first-sync limit holds for tokens taken with POST /tokens/offline: made-up device ids are refused', async () => {
    const op = await operator()
    const take = async (device_id: string) => {
      const res = await offline(op, { event_id: 1, device_id })
      assert.equal(res.statusCode, 200, res.body)
      return res.json().offline_token as string
    }
    const firstSync = (token: string) =>
      t.request({ method: 'GET', url: '/events/1/scan-sync?format=columns', token })
    // Every token taken for the device draws on the device's one budget.
    const id = String(ids[SYNCING])
    for (let i = 0; i < FIRST_SYNCS_PER_DEVICE; i++) {
      const res = await firstSync(await take(id))
      assert.equal(res.statusCode, 200, res.body)
    }
    assert.equal((await firstSync(await take(id))).statusCode, 429)
    // No made-up id gets a token, so none gets a budget of its own.
    for (const madeUp of [`0${id}`, `${id}.0`, 'scanner-b', String(ids[WINTER]! + 1000)]) {
      const res = await offline(op, { event_id: 1, device_id: madeUp })
      assert.ok([404, 422].includes(res.statusCode), `${madeUp}: ${res.statusCode} ${res.body}`)
    }
  })
})
