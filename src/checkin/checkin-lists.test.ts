import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { CHECKIN_CHECKPOINTS, CHECKIN_SCANS } from '../../test/helpers/checkin-cases.js'
import {
  type Festival,
  freshToken,
  setLocalTime,
  setUpFestival,
  festivalCounts as statuses,
} from '../../test/helpers/festival.js'
import { type PartnerKeys, partnerGet, registerReceiver, seedPartner } from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'

forEachBackend(
  httpBackends,
  'check-in lists: the case table online',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let f: Festival
    let receiver: Receiver
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      receiver = await startReceiver()
      await registerReceiver(t, keys.write, receiver.url)
      f = await setUpFestival(t, keys.write)
    })
    after(() => receiver.close())

    test('every scan of the table answers as the rule says; the counts at each checkpoint; one use and one webhook per ticket', async () => {
      const operator = freshToken(t, 'op@example.com', 'operator')
      const checkpoints = [...CHECKIN_CHECKPOINTS]
      const firstUses = new Map<string, string>()
      for (const s of CHECKIN_SCANS) {
        while (checkpoints.length && checkpoints[0]!.at < s.at) {
          const c = checkpoints.shift()!
          setLocalTime(t, c.at)
          assert.deepEqual(await statuses(t, f), c.counts, `counts at ${c.at}`)
        }
        setLocalTime(t, s.at)
        const ticket = f.tickets[s.ticket]
        const res = await t.request({
          method: 'POST',
          url: `/tickets/${ticket.transfer_uid}/use`,
          token: await operator(),
          payload: {
            access_gate: `${s.list} gate`,
            ...(s.list === 'default' ? {} : { checkin_list_id: f.lists[s.list] }),
            ...(s.direction === 'exit' ? { direction: 'exit' } : {}),
          },
        })
        const label = `${s.at} ${s.ticket} ${s.direction} ${s.list}`
        if (s.expect === 'accepted') {
          assert.equal(res.statusCode, 200, `${label}: ${res.body}`)
          const body = res.json()
          assert.equal(body.checkin_list_id, f.lists[s.list], label)
          assert.equal(body.direction, s.direction, label)
          assert.equal(body.first_use, s.first_use === true, `${label}: first use`)
          assert.equal(body.used_timestamp.slice(0, 19), s.at, label)
          if (s.first_use) firstUses.set(s.ticket, body.used_timestamp)
        } else {
          assert.equal(res.statusCode, 409, `${label}: ${res.body}`)
          assert.equal(res.json().error, s.expect, label)
          assert.equal(res.json().reason, s.expect, label)
          if (s.expect === 'already_used')
            assert.equal(res.json().used_timestamp, firstUses.get(s.ticket), label)
        }
      }
      for (const c of checkpoints) {
        setLocalTime(t, c.at)
        assert.deepEqual(await statuses(t, f), c.counts, `counts at ${c.at}`)
      }
      // Partners see USED and the first use, as before lists.
      for (const [name, ticket] of Object.entries(f.tickets)) {
        const seen = (
          await partnerGet(t, `/companies/transfer/${ticket.company_ticket_id}`, keys.read)
        ).json()
        assert.equal(seen.status, 'USED', name)
        assert.equal(seen.used_timestamp, firstUses.get(name), name)
      }
      const deliveries = await t.db.db
        .selectFrom('webhook_deliveries')
        .select(['transfer_id', (eb) => eb.fn.countAll().as('n')])
        .where('event_id', '=', 1)
        .groupBy('transfer_id')
        .execute()
      assert.equal(deliveries.length, Object.keys(f.tickets).length)
      for (const d of deliveries) assert.equal(Number(d.n), 1)
    })

    test('the scan log: every scan, refused ones too, newest first, paged and filtered', async () => {
      const get = async (query: string) => {
        const res = await t.request({
          method: 'GET',
          url: `/events/1/checkins?${query}`,
          token: await f.admin(),
        })
        assert.equal(res.statusCode, 200, res.body)
        return res.json() as { checkins: Record<string, unknown>[]; next_cursor: string | null }
      }
      const all: Record<string, unknown>[] = []
      let cursor: string | null = ''
      while (cursor !== null) {
        const page = await get(`limit=7${cursor ? `&cursor=${cursor}` : ''}`)
        all.push(...page.checkins)
        cursor = page.next_cursor
      }
      assert.equal(all.length, CHECKIN_SCANS.length)
      const ids = all.map((c) => Number(c.id))
      assert.deepEqual(
        ids,
        [...ids].sort((a, b) => b - a),
        'newest first',
      )
      const refused = CHECKIN_SCANS.filter((s) => s.expect !== 'accepted')
      assert.equal((await get('result=refused&limit=500')).checkins.length, refused.length)
      const product = (await get('reason=product&limit=500')).checkins
      assert.equal(product.length, refused.filter((s) => s.expect === 'product').length)
      for (const c of product) assert.equal(c.result, 'refused')
      const camping = (await get(`checkin_list_id=${f.lists.camping}&limit=500`)).checkins
      assert.equal(camping.length, CHECKIN_SCANS.filter((s) => s.list === 'camping').length)
      assert.equal(camping[0]!.local_at!.toString().slice(0, 19), '2027-07-19T12:00:01')
      assert.equal(camping[0]!.reason, 'invalid_time')
      assert.equal(camping[0]!.gate, 'camping gate')
      assert.match(String(camping[0]!.actor), /^operator:/)
      assert.equal((await get('device_id=7&limit=500')).checkins.length, 0)
    })

    test('a list by name: 404 for a list of another event or an archived one, 409 wrong_event, the default list unchangeable', async () => {
      setLocalTime(t, '2027-07-17T13:00:00')
      const admin = await f.admin()
      const root = (await login(t, 'root@example.com')).access_token
      const other = await t.request({
        method: 'POST',
        url: '/events/2/checkin-lists',
        token: root,
        payload: { name: 'Winter gate' },
      })
      assert.equal(other.statusCode, 201, other.body)
      const operator = (await login(t, 'op@example.com', 'operator')).access_token
      const use = (payload: Record<string, unknown>) =>
        t.request({
          method: 'POST',
          url: `/tickets/${f.tickets.camper.transfer_uid}/use`,
          token: operator,
          payload,
        })
      assert.equal(
        (await use({ checkin_list_id: other.json().id })).statusCode,
        404,
        'not a list of its events',
      )
      const superScan = await t.request({
        method: 'POST',
        url: `/tickets/${f.tickets.camper.transfer_uid}/use`,
        token: root,
        payload: { checkin_list_id: other.json().id },
      })
      assert.equal(superScan.statusCode, 403, 'administrators do not scan')
      // A gate of both events: the ticket is refused wrong_event there, and the refusal counted.
      await t.seed({
        operators: [
          {
            email: 'both@example.com',
            password: 's3cret-pass',
            event_id: 1,
            mode: 0,
            permissions: { '1': ['ticket:scan'], '2': ['ticket:scan'] },
          },
        ],
      })
      const both = (await login(t, 'both@example.com', 'operator')).access_token
      const wrong = await t.request({
        method: 'POST',
        url: `/tickets/${f.tickets.camper.transfer_uid}/use`,
        token: both,
        payload: { checkin_list_id: other.json().id },
      })
      assert.equal(wrong.statusCode, 409, wrong.body)
      assert.equal(wrong.json().error, 'wrong_event')
      const otherStatus = await t.request({
        method: 'GET',
        url: `/events/2/checkin-lists/${other.json().id}/status`,
        token: root,
      })
      assert.deepEqual(otherStatus.json().refused, { wrong_event: 1 })
      const unknown = await t.request({
        method: 'POST',
        url: `/tickets/${'0'.repeat(32)}/use`,
        token: operator,
        payload: { checkin_list_id: f.lists.camping },
      })
      assert.equal(unknown.statusCode, 404)
      const camping = await t.request({
        method: 'GET',
        url: `/events/1/checkin-lists/${f.lists.camping}/status`,
        token: admin,
      })
      assert.equal(camping.json().refused.unknown, 1, 'a scan of no ticket on a list named is counted')
      assert.equal((await use({ checkin_list_id: 999_999 })).statusCode, 404)
      const archived = await t.request({
        method: 'DELETE',
        url: `/events/1/checkin-lists/${f.lists.stage_sun}`,
        token: admin,
      })
      assert.equal(archived.statusCode, 200, archived.body)
      assert.ok(archived.json().archived_at)
      assert.equal((await use({ checkin_list_id: f.lists.stage_sun })).statusCode, 404)
      const lists = await t.request({ method: 'GET', url: '/events/1/checkin-lists', token: admin })
      assert.ok(!lists.json().some((l: { id: number }) => l.id === f.lists.stage_sun))
      const withArchived = await t.request({
        method: 'GET',
        url: '/events/1/checkin-lists?archived=true',
        token: admin,
      })
      assert.ok(withArchived.json().some((l: { id: number }) => l.id === f.lists.stage_sun))
      for (const method of ['PATCH', 'DELETE'] as const) {
        const res = await t.request({
          method,
          url: `/events/1/checkin-lists/${f.lists.default}`,
          token: admin,
          ...(method === 'PATCH' ? { payload: { allow_multiple_entries: true } } : {}),
        })
        assert.equal(res.statusCode, 409, `${method} default list`)
      }
    })
  },
  { WEBHOOK_ALLOW_PRIVATE: 'true' },
)

forEachBackend(httpBackends, 'check-in lists: managing them', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
  })

  test('every event has its default list, the specification’s single use; admins and operators of the event manage lists, others not', async () => {
    const admin = (await login(t, 'ev1@example.com')).access_token
    const operator = (await login(t, 'op@example.com', 'operator')).access_token
    const otherOperator = (await login(t, 'op2@example.com', 'operator')).access_token
    const lists = await t.request({ method: 'GET', url: '/events/1/checkin-lists', token: admin })
    assert.equal(lists.statusCode, 200, lists.body)
    assert.deepEqual(
      lists.json().map((l: Record<string, unknown>) => {
        const { id: _id, created_at: _c, updated_at: _u, ...rest } = l
        return rest
      }),
      [
        {
          event_id: 1,
          name: 'Default',
          is_default: true,
          ticket_type_ids: null,
          allow_multiple_entries: false,
          allow_entry_after_exit: false,
          windows: null,
          exit_all_at: null,
          archived_at: null,
        },
      ],
    )
    const created = await t.request({
      method: 'POST',
      url: '/events/1/checkin-lists',
      token: operator,
      payload: { name: 'VIP' },
    })
    assert.equal(created.statusCode, 201, created.body)
    assert.equal(created.json().allow_entry_after_exit, true, 'default true')
    assert.equal(created.json().allow_multiple_entries, false)
    assert.equal(created.json().is_default, false)
    const id = created.json().id
    const patched = await t.request({
      method: 'PATCH',
      url: `/events/1/checkin-lists/${id}`,
      token: admin,
      payload: {
        exit_all_at: '05:30',
        windows: [{ from: '2027-07-16T10:00:00', until: '2027-07-16T23:00:00' }],
      },
    })
    assert.equal(patched.statusCode, 200, patched.body)
    assert.equal(patched.json().exit_all_at, '05:30')
    assert.equal(patched.json().name, 'VIP')
    for (const token of [otherOperator, undefined]) {
      const res = await t.request({
        method: 'GET',
        url: '/events/1/checkin-lists',
        ...(token ? { token } : {}),
      })
      assert.equal(res.statusCode, token ? 403 : 401)
    }
    const partnerKey = await t.request({
      method: 'GET',
      url: '/events/1/checkin-lists',
      headers: { authorization: `Bearer ${keys.write}` },
    })
    assert.ok([401, 403].includes(partnerKey.statusCode), 'a partner key manages no lists')
    const root = (await login(t, 'root@example.com')).access_token
    assert.equal(
      (await t.request({ method: 'GET', url: '/events/99/checkin-lists', token: root })).statusCode,
      404,
    )
  })

  test('422 for ticket types of another event, windows that are no times or end before they start, a bad exit_all_at', async () => {
    const admin = (await login(t, 'ev1@example.com')).access_token
    const post = (payload: Record<string, unknown>) =>
      t.request({ method: 'POST', url: '/events/1/checkin-lists', token: admin, payload })
    assert.equal((await post({ name: 'x', ticket_type_ids: ['nope'] })).statusCode, 422)
    assert.equal(
      (await post({ name: 'x', windows: [{ from: '2027-02-30T10:00:00', until: '2027-03-01T10:00:00' }] }))
        .statusCode,
      422,
    )
    assert.equal(
      (await post({ name: 'x', windows: [{ from: '2027-03-02T10:00:00', until: '2027-03-01T10:00:00' }] }))
        .statusCode,
      422,
    )
    assert.equal((await post({ name: 'x', exit_all_at: '24:00' })).statusCode, 422)
    assert.equal((await post({ name: '' })).statusCode, 422)
    assert.equal((await post({ name: 'x', extra: 1 })).statusCode, 422)
  })
})
