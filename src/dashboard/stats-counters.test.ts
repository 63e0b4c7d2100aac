import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import fc from 'fast-check'
import { sql } from 'kysely'
import { ACTIVITY_ENV, EVENT_UID } from '../../test/helpers/activity.js'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  claimTokenOf,
  consumerToken,
  customerId,
  outboxMail,
  type PartnerKeys,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { until } from '../../test/helpers/until.js'
import type { Db } from '../platform/db/database.js'
import { SLOT_MS } from '../platform/db/migrations/019-scale.js'

/**
 * The statistics counters (migration 019) against a full recount of the tables they summarise, after
 * a randomized mix of what partners, holders and gates do through HTTP: transfers, claims, uses with
 * and without a gate, batch uploads (late ones among them), re-issues, and webhook deliveries tried.
 */

const EMAILS = ['mix1@example.com', 'mix2@example.com', 'mix3@example.com']
const GATES = [undefined, 'North', 'South', 'East'] as const

type Op =
  | { kind: 'transfer'; type: number; email: number; balance: number; promo: number; gate: number }
  | { kind: 'use'; ticket: number; gate: number }
  | { kind: 'batch'; tickets: number[]; hoursAgo: number; gate: number }
  | { kind: 'reissue'; ticket: number }
  | { kind: 'claim'; email: number }

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    arbitrary: fc.record({
      kind: fc.constant('transfer' as const),
      type: fc.nat(2),
      email: fc.nat(EMAILS.length - 1),
      balance: fc.nat(5000),
      promo: fc.nat(500),
      gate: fc.nat(GATES.length - 1),
    }),
    weight: 4,
  },
  {
    arbitrary: fc.record({ kind: fc.constant('use' as const), ticket: fc.nat(), gate: fc.nat(3) }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant('batch' as const),
      tickets: fc.array(fc.nat(), { minLength: 1, maxLength: 4 }),
      // Up to 100 hours ago: past OFFLINE_TOKEN_EXPIRE_HOURS, such a scan is recorded at the service's time.
      hoursAgo: fc.nat(100),
      gate: fc.nat(3),
    }),
    weight: 2,
  },
  { arbitrary: fc.record({ kind: fc.constant('reissue' as const), ticket: fc.nat() }), weight: 1 },
  {
    arbitrary: fc.record({ kind: fc.constant('claim' as const), email: fc.nat(EMAILS.length - 1) }),
    weight: 1,
  },
)

/** Every counter as stored, and as a full recount of transfers and deliveries computes it. */
async function countersAndRecount(db: Db) {
  const stored = {
    types: await db
      .selectFrom('ticket_counts')
      .select(['ticket_type_id', 'measure', 'n'])
      .where('n', '<>', 0)
      .execute(),
    gates: await db
      .selectFrom('gate_use_counts')
      .select(['event_id', 'gate', 'n'])
      .where('n', '<>', 0)
      .execute(),
    slots: await db
      .selectFrom('use_slot_counts')
      .select(['event_id', 'slot', 'n'])
      .where('n', '<>', 0)
      .execute(),
    deliveries: await db
      .selectFrom('delivery_counts')
      .select(['event_id', 'status', 'tried', 'n'])
      .where('n', '<>', 0)
      .execute(),
  }
  const transfers = await db
    .selectFrom('transfers')
    .select([
      'ticket_type_id',
      'event_id',
      'balance',
      'promo_balance',
      'claimed_at',
      'used_at',
      'used_gate',
      'access_gate',
    ])
    .execute()
  const deliveries = await db
    .selectFrom('webhook_deliveries')
    .select(['event_id', 'status', 'attempts'])
    .execute()
  const add = (m: Map<string, number>, key: string, n: number) => {
    if (n !== 0) m.set(key, (m.get(key) ?? 0) + n)
  }
  const types = new Map<string, number>()
  const gates = new Map<string, number>()
  const slots = new Map<string, number>()
  for (const t of transfers) {
    add(types, `${t.ticket_type_id}/issued`, 1)
    add(types, `${t.ticket_type_id}/balance`, Number(t.balance))
    add(types, `${t.ticket_type_id}/promo_balance`, Number(t.promo_balance))
    if (t.claimed_at !== null) add(types, `${t.ticket_type_id}/claimed`, 1)
    if (t.used_at === null) continue
    add(types, `${t.ticket_type_id}/used`, 1)
    const gate = t.used_gate ?? t.access_gate
    add(gates, `${t.event_id}/${gate === null ? '-' : `+${gate}`}`, 1)
    add(slots, `${t.event_id}/${Math.floor(Number(t.used_at) / SLOT_MS)}`, 1)
  }
  const byDelivery = new Map<string, number>()
  for (const d of deliveries) add(byDelivery, `${d.event_id}/${d.status}/${d.attempts === 0 ? 0 : 1}`, 1)
  const sorted = (m: Map<string, number>) => [...m].sort(([a], [b]) => a.localeCompare(b))
  const of = <T>(rows: T[], key: (r: T) => string, n: (r: T) => unknown) =>
    sorted(new Map(rows.map((r) => [key(r), Number(n(r))])))
  return {
    stored: {
      types: of(
        stored.types,
        (r) => `${r.ticket_type_id}/${r.measure}`,
        (r) => r.n,
      ),
      gates: of(
        stored.gates,
        (r) => `${r.event_id}/${r.gate}`,
        (r) => r.n,
      ),
      slots: of(
        stored.slots,
        (r) => `${r.event_id}/${Number(r.slot)}`,
        (r) => r.n,
      ),
      deliveries: of(
        stored.deliveries,
        (r) => `${r.event_id}/${r.status}/${r.tried}`,
        (r) => r.n,
      ),
    },
    recount: {
      types: sorted(types),
      gates: sorted(gates),
      slots: sorted(slots),
      deliveries: sorted(byDelivery),
    },
    transfers: transfers.length,
    used: transfers.filter((t) => t.used_at !== null).length,
  }
}

forEachBackend(
  httpBackends,
  'statistics counters equal a full recount after a randomized mix',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let receiver: Receiver
    let operator: string
    let holder: string
    let admin: string
    const types: string[] = []
    const tickets: { uid: string; company: string }[] = []
    let n = 0

    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      // Some deliveries succeed, some fail and stay pending: their counters move between states.
      receiver = await startReceiver(
        Array.from({ length: 400 }, (_, i) => ({ status: i % 3 === 0 ? 503 : 200 })),
      )
      const hook = await t.request({
        method: 'PUT',
        url: '/companies/webhook',
        headers: { api_key: keys.write },
        payload: { url: receiver.url },
      })
      assert.equal(hook.statusCode, 200, hook.body)
      for (const [name, price] of [
        ['Weekend', 89.5],
        ['Day', 49.9],
        ['VIP', 199],
      ] as const) {
        const res = await partnerPost(t, '/companies/ticket', keys.write, {
          event_uid: EVENT_UID,
          name,
          price,
          ticket_date: '2026-07-18T10:00:00.000',
        })
        assert.equal(res.statusCode, 201, res.body)
        types.push(res.json().ticket_uid)
      }
      operator = (await login(t, 'op@example.com', 'operator')).access_token
      holder = consumerToken(t, await customerId(t, '+4915100000002'))
      admin = (await login(t, 'ev1@example.com')).access_token
    })
    after(async () => {
      await receiver?.close()
    })

    const apply = async (o: Op) => {
      const pick = (i: number) => tickets[i % tickets.length]
      switch (o.kind) {
        case 'transfer': {
          n++
          const gate = GATES[o.gate]
          const res = await partnerPost(t, '/companies/transfer', keys.write, {
            event_uid: EVENT_UID,
            email: EMAILS[o.email],
            ticket_uid: types[o.type],
            company_ticket_id: `mix-${n}`,
            balance: o.balance / 100,
            promo_balance: o.promo / 100,
            ...(gate ? { additional_info: { access_gate: gate } } : {}),
          })
          assert.equal(res.statusCode, 201, res.body)
          tickets.push({ uid: res.json().transfer_uid, company: `mix-${n}` })
          return
        }
        case 'use': {
          const ticket = pick(o.ticket)
          if (!ticket) return
          const gate = GATES[o.gate]
          const res = await t.request({
            method: 'POST',
            url: `/tickets/${ticket.uid}/use`,
            token: operator,
            payload: gate ? { access_gate: gate } : {},
          })
          assert.ok([200, 409].includes(res.statusCode), res.body)
          return
        }
        case 'batch': {
          if (tickets.length === 0) return
          const gate = GATES[o.gate]
          const used_at = new Date(t.clock.now() - o.hoursAgo * 3600_000).toISOString()
          const res = await t.request({
            method: 'POST',
            url: '/tickets/use-batch',
            token: operator,
            payload: {
              scans: o.tickets.map((i) => ({
                transfer_uid: pick(i)!.uid,
                used_at,
                ...(gate ? { access_gate: gate } : {}),
              })),
            },
          })
          assert.equal(res.statusCode, 200, res.body)
          return
        }
        case 'reissue': {
          const ticket = pick(o.ticket)
          if (!ticket) return
          const res = await partnerPost(t, `/companies/transfer/${ticket.company}/reissue`, keys.write, {})
          assert.ok(res.statusCode < 500, res.body)
          return
        }
        case 'claim': {
          const mail = outboxMail(t)
            .filter((m) => m.to === EMAILS[o.email])
            .at(-1)
          if (!mail) return
          const res = await t.request({
            method: 'POST',
            url: `/holder/links/${claimTokenOf(mail.text)}/claim`,
            token: holder,
          })
          assert.ok(res.statusCode < 500, res.body)
          return
        }
      }
    }

    test('after each mix the counters are the recount, and the stats API shows them', async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(op, { minLength: 5, maxLength: 25 }), async (ops) => {
          for (const o of ops) await apply(o)
          // Deliveries in flight settle first: a job between the two reads would differ for no fault.
          await until('deliveries settled', async () => {
            const busy = await t.db.db
              .selectFrom('jobs')
              .select('id')
              .where('done_at', 'is', null)
              .where('failed_at', 'is', null)
              .where('run_at', '<=', t.clock.now())
              .execute()
            return busy.length === 0
          })
          const c = await countersAndRecount(t.db.db)
          assert.deepEqual(c.stored, c.recount)
          const stats = await t.request({ method: 'GET', url: '/events/1/stats?range=7d', token: admin })
          assert.equal(stats.statusCode, 200, stats.body)
          const s = stats.json()
          assert.equal(s.totals.issued, c.transfers)
          assert.equal(s.totals.used, c.used)
          assert.equal(
            s.uses_per_gate.reduce((sum: number, g: { count: number }) => sum + g.count, 0),
            c.used,
          )
        }),
        { numRuns: 4 },
      )
      assert.ok(tickets.length > 0, 'the mix made transfers')
      const used = await t.db.db
        .selectFrom('transfers')
        .select(sql<number>`count(*)`.as('n'))
        .where('used_at', 'is not', null)
        .executeTakeFirstOrThrow()
      assert.ok(Number(used.n) > 0, 'and uses')
    })
  },
  ACTIVITY_ENV,
)
