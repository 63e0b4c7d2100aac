import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { ACTIVITY_ENV } from '../../test/helpers/activity.js'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { dashboardSession } from '../../test/helpers/dashboard.js'
import { newTicketType, newTransfer, type PartnerKeys, seedPartner } from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { until } from '../../test/helpers/until.js'

/**
 * Third audit (docs/security.md), "A partner's dashboard user sees other partners": the statistics page showed a user bound
 * to partner A the event's sales and revenue of all partners and the webhook counters of partner B.
 * Two partners sell at event 1 (Acme: 3 tickets, 1 used at North; Rival: 4 tickets, 2 used at South,
 * one of them of Acme's ticket type, the catalogue being shared); each page a bound user opens shows
 * its partner's figures only, an administrator the event's.
 */
const PRICE = 49.9

forEachBackend(
  httpBackends,
  "a partner's dashboard user sees other partners",
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let acme: string
    let rival: string
    let admin: string
    const receivers: Receiver[] = []
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      await t.seed({
        dashboard_users: [
          { username: 'acme-user', password: 's3cret-pass', event_ids: [1], partner: 'Acme' },
          { username: 'rival-user', password: 's3cret-pass', event_ids: [1], partner: 'Rival' },
        ],
      })
      for (const key of [keys.write, keys.rival]) {
        const receiver = await startReceiver()
        receivers.push(receiver)
        const res = await t.request({
          method: 'PUT',
          url: '/companies/webhook',
          headers: { api_key: key },
          payload: { url: receiver.url },
        })
        assert.equal(res.statusCode, 200, res.body)
      }
      const acmeType = await newTicketType(t, keys.write)
      const rivalType = await newTicketType(t, keys.rival)
      const sold = async (key: string, type: string, n: number) => {
        const out = []
        for (let i = 0; i < n; i++) out.push((await newTransfer(t, key, type)).transfer_uid)
        return out
      }
      const acmeTickets = await sold(keys.write, acmeType, 3)
      const rivalTickets = [
        ...(await sold(keys.rival, acmeType, 1)),
        ...(await sold(keys.rival, rivalType, 3)),
      ]
      const operator = (await login(t, 'op@example.com', 'operator')).access_token
      const use = async (uid: string, gate: string) => {
        const res = await t.request({
          method: 'POST',
          url: `/tickets/${uid}/use`,
          token: operator,
          payload: { access_gate: gate },
        })
        assert.equal(res.statusCode, 200, res.body)
      }
      await use(acmeTickets[0]!, 'North')
      await use(rivalTickets[0]!, 'South')
      await use(rivalTickets[1]!, 'South')
      // Each use notifies the partner that transferred the ticket.
      await until(
        'the notifications delivered',
        () => receivers[0]!.log.length === 1 && receivers[1]!.log.length === 2,
      )
      acme = await dashboardSession(t, 'acme-user')
      rival = await dashboardSession(t, 'rival-user')
      admin = await dashboardSession(t, 'ev1@example.com')
    })
    after(async () => {
      for (const r of receivers) await r.close()
    })

    const get = (url: string, session: string) =>
      t.request({ method: 'GET', url, cookies: { wb_session: session } })
    const stats = async (session: string) => {
      const res = await get('/dashboard/api/events/1/stats?range=1h', session)
      assert.equal(res.statusCode, 200, res.body)
      return res.json()
    }
    const figures = (s: Record<string, never>) => {
      const { totals, uses_per_gate, uses_over_time, webhook } = s as Record<string, Record<string, unknown>>
      return {
        issued: totals!.issued,
        used: totals!.used,
        revenue: totals!.revenue,
        gates: uses_per_gate,
        uses: uses_over_time!.total,
        delivered: webhook!.delivered,
      }
    }

    test("the event page's figures: sales, revenue, uses per gate and over time, webhook counters are the partner's", async () => {
      assert.deepEqual(figures(await stats(acme)), {
        issued: 3,
        used: 1,
        revenue: 3 * PRICE,
        gates: [{ access_gate: 'North', count: 1 }],
        uses: 1,
        delivered: 1,
      })
      assert.deepEqual(figures(await stats(rival)), {
        issued: 4,
        used: 2,
        revenue: Math.round(4 * PRICE * 100) / 100,
        gates: [{ access_gate: 'South', count: 2 }],
        uses: 2,
        delivered: 2,
      })
      assert.deepEqual(figures(await stats(admin)), {
        issued: 7,
        used: 3,
        revenue: Math.round(7 * PRICE * 100) / 100,
        gates: [
          { access_gate: 'South', count: 2 },
          { access_gate: 'North', count: 1 },
        ],
        uses: 3,
        delivered: 3,
      })
      // Per ticket type: the shared catalogue, each with the partner's own counts.
      const types = (await stats(rival)).ticket_types.map((x: { issued: number; used: number }) => [
        x.issued,
        x.used,
      ])
      assert.deepEqual(types, [
        [1, 1],
        [3, 1],
      ])
      // The receiver shown is the partner's own.
      assert.equal((await stats(acme)).webhook.url, receivers[0]!.url)
      assert.equal((await stats(rival)).webhook.url, receivers[1]!.url)
    })

    test("the event list's figures are the partner's", async () => {
      const line = async (session: string) => {
        const page = await get('/dashboard', session)
        assert.equal(page.statusCode, 200)
        return /data-event-figures>([^<]*)</.exec(page.body)?.[1]
      }
      assert.equal(await line(acme), '3 issued · 1 used · 149.70 revenue')
      assert.equal(await line(rival), '4 issued · 2 used · 199.60 revenue')
      assert.equal(await line(admin), '7 issued · 3 used · 349.30 revenue')
    })

    test("the webhook deliveries page lists the partner's deliveries only", async () => {
      const rows = async (session: string) => {
        const page = await get('/dashboard/events/1/webhooks', session)
        assert.equal(page.statusCode, 200)
        return [...page.body.matchAll(/data-delivery="(\d+)"/g)].length
      }
      assert.equal(await rows(acme), 1)
      assert.equal(await rows(rival), 2)
    })
  },
  ACTIVITY_ENV,
)

test('the expected revenue is the price times the tickets, in major units', () => {
  assert.equal(Math.round(3 * PRICE * 100) / 100, 149.7)
})
