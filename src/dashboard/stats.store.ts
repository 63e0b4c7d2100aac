import { sql } from 'kysely'
import type { Db } from '../platform/db/database.js'
import { SLOT_MS } from '../platform/db/migrations/019-scale.js'

// Every figure is counted by the database. Counts and sums come back as numbers on SQLite and as
// numbers or numeric strings on PostgreSQL, hence the Number() around each.

/**
 * The counters of an event's ticket types (kept by the database in every write of a ticket, migration
 * 019): issued, claimed and used, and the balances and promotional balances loaded (minor units), one
 * row per type, in the order the types were created.
 */
export async function ticketTypeFigures(db: Db, eventId: number) {
  const measure = (name: string) =>
    sql<number>`coalesce(sum(case when ${sql.ref('c.measure')} = ${name} then ${sql.ref('c.n')} end), 0)`
  const rows = await db
    .selectFrom('ticket_types as tt')
    .leftJoin('ticket_counts as c', 'c.ticket_type_id', 'tt.id')
    .select([
      'tt.id',
      'tt.uid',
      'tt.name',
      'tt.ticket_date',
      'tt.price',
      measure('issued').as('issued'),
      measure('claimed').as('claimed'),
      measure('used').as('used'),
      measure('balance').as('balance'),
      measure('promo_balance').as('promo_balance'),
    ])
    .where('tt.event_id', '=', eventId)
    .groupBy(['tt.id', 'tt.uid', 'tt.name', 'tt.ticket_date', 'tt.price'])
    .orderBy('tt.id')
    .execute()
  return rows.map((r) => ({
    id: Number(r.id),
    uid: r.uid,
    name: r.name,
    ticket_date: r.ticket_date,
    price: Number(r.price),
    issued: Number(r.issued),
    claimed: Number(r.claimed),
    used: Number(r.used),
    balance: Number(r.balance),
    promo_balance: Number(r.promo_balance),
  }))
}

/** Per event: tickets issued and used and the revenue (minor units), for the list of events. */
export async function eventListFigures(db: Db, eventIds: number[]) {
  if (eventIds.length === 0) return new Map<number, { issued: number; used: number; revenue: number }>()
  const rows = await db
    .selectFrom('ticket_counts as c')
    .innerJoin('ticket_types as tt', 'tt.id', 'c.ticket_type_id')
    .select([
      'c.event_id',
      sql<number>`sum(case when ${sql.ref('c.measure')} = 'issued' then ${sql.ref('c.n')} else 0 end)`.as(
        'issued',
      ),
      sql<number>`sum(case when ${sql.ref('c.measure')} = 'used' then ${sql.ref('c.n')} else 0 end)`.as(
        'used',
      ),
      sql<number>`sum(case when ${sql.ref('c.measure')} = 'issued' then ${sql.ref('c.n')} * ${sql.ref('tt.price')} else 0 end)`.as(
        'revenue',
      ),
    ])
    .where('c.event_id', 'in', eventIds)
    .where('c.measure', 'in', ['issued', 'used'])
    .groupBy('c.event_id')
    .execute()
  return new Map(
    rows.map((r) => [
      Number(r.event_id),
      { issued: Number(r.issued), used: Number(r.used), revenue: Number(r.revenue ?? 0) },
    ]),
  )
}

/** Uses per 5-minute slot (`SLOT_MS`) in [from, to), keyed by the slot's start (epoch ms). */
export async function usesPerSlot(db: Db, eventId: number, from: number, to: number) {
  const rows = await db
    .selectFrom('use_slot_counts')
    .select(['slot', 'n'])
    .where('event_id', '=', eventId)
    .where('slot', '>=', Math.floor(from / SLOT_MS))
    .where('slot', '<', Math.ceil(to / SLOT_MS))
    .execute()
  return new Map(rows.map((r) => [Number(r.slot) * SLOT_MS, Number(r.n)]))
}

/** Every use of the event by gate: the gate the scan named, else the gate printed on the ticket. */
export async function usesPerGate(db: Db, eventId: number) {
  const rows = await db
    .selectFrom('gate_use_counts')
    .select(['gate', 'n'])
    .where('event_id', '=', eventId)
    .where('n', '<>', 0)
    .execute()
  return byUses(
    rows.map((r) => ({ access_gate: r.gate === '-' ? null : r.gate.slice(1), count: Number(r.n) })),
  )
}

/** Gates by uses, most first; ties by name, the tickets without a gate last. */
export function byUses(gates: { access_gate: string | null; count: number }[]) {
  return gates.sort(
    (a, b) => b.count - a.count || (a.access_gate ?? '\uffff').localeCompare(b.access_gate ?? '\uffff'),
  )
}

export async function webhookHealth(db: Db, eventId: number) {
  const hook = await db
    .selectFrom('webhooks')
    .select(['url', 'disabled_at', 'disabled_reason'])
    .where('event_id', '=', eventId)
    // With several partners, the receiver of the event's first partner (the one its pages show first).
    .orderBy('partner_id')
    .executeTakeFirst()
  const counts = await db
    .selectFrom('delivery_counts')
    .select(['status', 'tried', 'n as count'])
    .where('event_id', '=', eventId)
    .execute()
  const lastError = await lastFailedAttempt(db, { eventId })
  return {
    hook: hook ?? null,
    counts: counts.map((c) => ({ ...c, tried: Number(c.tried), count: Number(c.count) })),
    lastError: lastError ?? null,
  }
}

/** The last failed delivery attempt of an event's deliveries, or of one partner's. */
export function lastFailedAttempt(db: Db, of: { eventId: number } | { partnerId: number }) {
  return (
    db
      .selectFrom('webhook_attempts as a')
      .innerJoin('webhook_deliveries as d', 'd.id', 'a.delivery_id')
      .select(['a.attempted_at', 'a.status_code', 'a.error'])
      .where((eb) =>
        'eventId' in of ? eb('d.event_id', '=', of.eventId) : eb('d.partner_id', '=', of.partnerId),
      )
      // The predicate of the partial index webhook_attempts_failed (migration 019), written as it is there.
      .where(sql<boolean>`(status_code is null or status_code < 200 or status_code >= 300)`)
      .orderBy('a.attempted_at', 'desc')
      .orderBy('a.id', 'desc')
      .limit(1)
      .executeTakeFirst()
  )
}
