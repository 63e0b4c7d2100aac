import { sql } from 'kysely'
import type { Db } from '../platform/db/database.js'

// Every figure is counted by the database. Counts and sums come back as numbers on SQLite and as
// numbers or numeric strings on PostgreSQL, hence the Number() around each.

export async function ticketTypeFigures(db: Db, eventId: number) {
  const rows = await db
    .selectFrom('ticket_types as tt')
    .leftJoin('transfers as t', 't.ticket_type_id', 'tt.id')
    .select((eb) => [
      'tt.uid',
      'tt.name',
      'tt.ticket_date',
      'tt.price',
      eb.fn.count('t.id').as('issued'),
      eb.fn.count('t.claimed_at').as('claimed'),
      eb.fn.count('t.used_at').as('used'),
    ])
    .where('tt.event_id', '=', eventId)
    .groupBy(['tt.id', 'tt.uid', 'tt.name', 'tt.ticket_date', 'tt.price'])
    .orderBy('tt.id')
    .execute()
  return rows.map((r) => ({
    uid: r.uid,
    name: r.name,
    ticket_date: r.ticket_date,
    price: Number(r.price),
    issued: Number(r.issued),
    claimed: Number(r.claimed),
    used: Number(r.used),
  }))
}

/** Per event: tickets issued and used and the revenue (minor units), for the list of events. */
export async function eventListFigures(db: Db, eventIds: number[]) {
  if (eventIds.length === 0) return new Map<number, { issued: number; used: number; revenue: number }>()
  const rows = await db
    .selectFrom('transfers as t')
    .innerJoin('ticket_types as tt', 'tt.id', 't.ticket_type_id')
    .select((eb) => [
      't.event_id',
      eb.fn.countAll().as('issued'),
      eb.fn.count('t.used_at').as('used'),
      eb.fn.sum('tt.price').as('revenue'),
    ])
    .where('t.event_id', 'in', eventIds)
    .groupBy('t.event_id')
    .execute()
  return new Map(
    rows.map((r) => [
      Number(r.event_id),
      { issued: Number(r.issued), used: Number(r.used), revenue: Number(r.revenue ?? 0) },
    ]),
  )
}

/** Balances and promotional balances loaded through transfers, in minor units. */
export async function balancesLoaded(db: Db, eventId: number) {
  const r = await db
    .selectFrom('transfers')
    .select((eb) => [eb.fn.sum('balance').as('balance'), eb.fn.sum('promo_balance').as('promo_balance')])
    .where('event_id', '=', eventId)
    .executeTakeFirst()
  return { balance: Number(r?.balance ?? 0), promo_balance: Number(r?.promo_balance ?? 0) }
}

/** Uses per `grainMs` step in [from, to), keyed by step index. */
export async function usesPerBucket(db: Db, eventId: number, from: number, to: number, grainMs: number) {
  const rows = await db
    .selectFrom('transfers')
    .select((eb) => [
      sql<number>`cast((${sql.ref('used_at')} - ${from}) / ${grainMs} as integer)`.as('bucket'),
      eb.fn.countAll().as('count'),
    ])
    .where('event_id', '=', eventId)
    .where('used_at', '>=', from)
    .where('used_at', '<', to)
    // By position: PostgreSQL would not match the select's expression, whose parameters differ.
    .groupBy(sql`1`)
    .execute()
  return new Map(rows.map((r) => [Number(r.bucket), Number(r.count)]))
}

/** Every use of the event by gate: the gate the scan named, else the gate printed on the ticket. */
export async function usesPerGate(db: Db, eventId: number) {
  const rows = await db
    .selectFrom('transfers')
    .select((eb) => [eb.fn.coalesce('used_gate', 'access_gate').as('gate'), eb.fn.countAll().as('count')])
    .where('event_id', '=', eventId)
    .where('used_at', 'is not', null)
    .groupBy(sql`1`)
    .execute()
  return rows
    .map((r) => ({ access_gate: r.gate, count: Number(r.count) }))
    .sort((a, b) => b.count - a.count || (a.access_gate ?? '\uffff').localeCompare(b.access_gate ?? '\uffff'))
}

export async function webhookHealth(db: Db, eventId: number) {
  const hook = await db
    .selectFrom('webhooks')
    .select(['url', 'disabled_at', 'disabled_reason'])
    .where('event_id', '=', eventId)
    .executeTakeFirst()
  const counts = await db
    .selectFrom('webhook_deliveries')
    .select((eb) => [
      'status',
      sql<number>`case when ${sql.ref('attempts')} = 0 then 0 else 1 end`.as('tried'),
      eb.fn.countAll().as('count'),
    ])
    .where('event_id', '=', eventId)
    .groupBy([sql`1`, sql`2`])
    .execute()
  const lastError = await db
    .selectFrom('webhook_attempts as a')
    .innerJoin('webhook_deliveries as d', 'd.id', 'a.delivery_id')
    .select(['a.attempted_at', 'a.status_code', 'a.error'])
    .where('d.event_id', '=', eventId)
    .where((eb) =>
      eb.or([eb('a.status_code', 'is', null), eb('a.status_code', '<', 200), eb('a.status_code', '>=', 300)]),
    )
    .orderBy('a.attempted_at', 'desc')
    .orderBy('a.id', 'desc')
    .limit(1)
    .executeTakeFirst()
  return {
    hook: hook ?? null,
    counts: counts.map((c) => ({ ...c, tried: Number(c.tried), count: Number(c.count) })),
    lastError: lastError ?? null,
  }
}
