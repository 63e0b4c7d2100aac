import { sql } from 'kysely'
import { nextFeedSeq, reserveFeedSeqs } from '../events/events.store.js'
import type { Db } from '../platform/db/database.js'
import type { TransfersTable } from '../platform/db/schema.js'

/*
 * The ticket ledger: the one module that writes `transfers` and the one that moves an event's sync-feed
 * position (docs/architecture.md, "Tables and their owners"). Tickets are issued by the partner API,
 * claimed by holders, used at gates and re-issued at the edge; each of those features calls the
 * functions below. A write that changes what a scanner must know (a new ticket, a use, a re-issue) takes
 * the next feed position here, in the caller's transaction, last: the position's UPDATE locks the event's
 * row until the transaction ends (see nextFeedSeq), so every transaction takes its other row locks first.
 */

/** What the issuer of a transfer stores; the ledger adds its status and feed position. */
export type NewTransfer = Pick<
  TransfersTable,
  | 'uid'
  | 'event_id'
  | 'ticket_type_id'
  | 'company_ticket_id'
  | 'email'
  | 'balance'
  | 'promo_balance'
  | 'access_gate'
  | 'seat_number'
  | 'link_id'
  | 'created_at'
  | 'code_body'
  | 'code_digest'
> & { partner_id: number }

// Issue (the partner API)

/** Records a new transfer at the end of its event's sync feed (in the caller's transaction, after its other locks). */
export async function issueTransfer(tx: Db, t: NewTransfer): Promise<void> {
  await tx
    .insertInto('transfers')
    .values({ ...t, status: 'TRANSFERRED', feed_seq: await nextFeedSeq(tx, t.event_id) })
    .execute()
}

/**
 * Many new transfers of one event, at consecutive feed positions (one reservation), one statement per
 * 100, in the caller's transaction after its other locks.
 */
export async function issueTransfers(tx: Db, eventId: number, rows: NewTransfer[]): Promise<void> {
  if (rows.length === 0) return
  const first = await reserveFeedSeqs(tx, eventId, rows.length)
  for (let i = 0; i < rows.length; i += 100)
    await tx
      .insertInto('transfers')
      .values(
        rows.slice(i, i + 100).map((t, n) => ({ ...t, status: 'TRANSFERRED', feed_seq: first + i + n })),
      )
      .execute()
}

/** Which of `ids` the partner has already used as company_ticket_id. */
export async function usedCompanyTicketIds(db: Db, partnerId: number, ids: string[]): Promise<Set<string>> {
  const used = new Set<string>()
  for (let i = 0; i < ids.length; i += 500) {
    const rows = await db
      .selectFrom('transfers')
      .select('company_ticket_id')
      .where('partner_id', '=', partnerId)
      .where('company_ticket_id', 'in', ids.slice(i, i + 500))
      .execute()
    for (const r of rows) used.add(r.company_ticket_id)
  }
  return used
}

/**
 * The stored code (its signing input, null without one) of each of a partner's transfers among `uids`,
 * by uid: what a replayed answer renders its ticket codes from.
 */
export async function transferCodeBodies(
  db: Db,
  partnerId: number,
  uids: string[],
): Promise<Map<string, string | null>> {
  const bodies = new Map<string, string | null>()
  for (let i = 0; i < uids.length; i += 500) {
    const rows = await db
      .selectFrom('transfers')
      .select(['uid', 'code_body'])
      .where('partner_id', '=', partnerId)
      .where('uid', 'in', uids.slice(i, i + 500))
      .execute()
    for (const r of rows) bodies.set(r.uid, r.code_body)
  }
  return bodies
}

/** A partner's transfer with what its answers show, looked up by the partner's identifier. */
export function findTransferByCompanyId(db: Db, partnerId: number, companyTicketId: string) {
  return db
    .selectFrom('transfers as t')
    .innerJoin('ticket_types as tt', 'tt.id', 't.ticket_type_id')
    .select([
      't.uid',
      'tt.uid as ticket_uid',
      't.company_ticket_id',
      't.email',
      't.balance',
      't.promo_balance',
      't.access_gate',
      't.seat_number',
      't.status',
      't.used_timestamp',
      't.used_at',
      't.claimed_at',
      't.mailed_at',
      't.created_at',
      't.code_body',
    ])
    .where('t.partner_id', '=', partnerId)
    .where('t.company_ticket_id', '=', companyTicketId)
    .executeTakeFirst()
}

// Transfer mail: one e-mail per holder link with the transfers not yet mailed.

/** Marks a link's not-yet-mailed transfers as mailed at `now` (the caller holds the link); their ids. */
export async function takeUnmailed(tx: Db, linkId: number, now: number): Promise<number[]> {
  const rows = await tx
    .updateTable('transfers')
    .set({ mailed_at: now })
    .where('link_id', '=', linkId)
    .where('mailed_at', 'is', null)
    .returning('id')
    .execute()
  return rows.map((r) => r.id)
}

/** What the transfer e-mail shows of each taken transfer, in id order. */
export function transfersToMail(db: Db, ids: number[]) {
  return db
    .selectFrom('transfers as t')
    .innerJoin('ticket_types as tt', 'tt.id', 't.ticket_type_id')
    .select([
      'tt.name',
      'tt.ticket_date',
      't.company_ticket_id',
      't.balance',
      't.promo_balance',
      't.seat_number',
      't.access_gate',
      't.code_body',
    ])
    .where('t.id', 'in', ids)
    .orderBy('t.id')
    .execute()
}

/** Undoes takeUnmailed after a failed send: the transfers taken at `takenAt` are mailed again. */
export async function releaseUnmailed(tx: Db, ids: number[], takenAt: number): Promise<void> {
  await tx
    .updateTable('transfers')
    .set({ mailed_at: null })
    .where('id', 'in', ids)
    .where('mailed_at', '=', takenAt)
    .execute()
}

// Holders: the tickets of a claim link or of a consumer, and a claim.

const holderColumns = [
  't.uid as transfer_uid',
  'e.uid as event_uid',
  'e.name as event_name',
  'tt.uid as ticket_uid',
  'tt.name',
  'tt.ticket_date',
  't.status',
  't.used_timestamp',
  't.used_at',
  'e.timezone as event_timezone',
  't.access_gate',
  't.seat_number',
  't.balance',
  't.promo_balance',
  't.code_body',
] as const

function holderTickets(db: Db) {
  return db
    .selectFrom('transfers as t')
    .innerJoin('ticket_types as tt', 'tt.id', 't.ticket_type_id')
    .innerJoin('events as e', 'e.id', 't.event_id')
    .select(holderColumns)
    .orderBy('t.id')
}

export const ticketsOfLink = (db: Db, linkId: number) =>
  holderTickets(db).where('t.link_id', '=', linkId).execute()
export const ticketsOfConsumer = (db: Db, customerId: number) =>
  holderTickets(db).where('t.customer_id', '=', customerId).execute()

/**
 * Moves a claimed link's tickets to the consumer (a ticket not yet used becomes CLAIMED), in the
 * claim's transaction; answers the sums of their balances (minor units).
 */
export async function claimTickets(tx: Db, linkId: number, customerId: number, now: number) {
  const moved = await tx
    .updateTable('transfers')
    .set((eb) => ({
      customer_id: customerId,
      claimed_at: now,
      status: eb.case().when('status', '=', 'TRANSFERRED').then('CLAIMED').else(eb.ref('status')).end(),
    }))
    .where('link_id', '=', linkId)
    .returning(['balance', 'promo_balance'])
    .execute()
  return {
    balance: moved.reduce((s, t) => s + Number(t.balance), 0),
    promo: moved.reduce((s, t) => s + Number(t.promo_balance), 0),
  }
}

// Gates: a ticket's use.

/** A ticket (transfer) by its uid, with its type's uid and its event's uid and time zone, for a scan. */
export function findTransferToUse(db: Db, transferUid: string) {
  return db
    .selectFrom('transfers as t')
    .innerJoin('events as e', 'e.id', 't.event_id')
    .innerJoin('ticket_types as tt', 'tt.id', 't.ticket_type_id')
    .select([
      't.id',
      't.event_id',
      'tt.uid as ticket_uid',
      't.partner_id',
      't.email',
      't.company_ticket_id',
      't.used_at',
      't.used_timestamp',
      't.code_version',
      't.created_at',
      'e.uid',
      'e.timezone',
    ])
    .where('t.uid', '=', transferUid)
    .executeTakeFirst()
}

/**
 * Marks a ticket used unless it already is, in the caller's transaction, and moves it to the end of the
 * sync feed so scanners learn of the use; undefined when another scan used it first, else whether the
 * scanned code version had been re-issued or was never issued. That is decided in the UPDATE itself,
 * against the row as it is then, so a re-issue committed a moment before the use is seen.
 */
export async function markUsed(
  tx: Db,
  ticket: { id: number; eventId: number },
  use: {
    used_at: number
    used_timestamp: string
    used_gate: string | null
    clockAdjusted: boolean
    /** The code version the device scanned, when it said. */
    version: number | undefined
    /** The scan carried a code that did not verify as one of this ticket's. */
    unknownCode: boolean
  },
): Promise<{ revokedCode: boolean; unknownCode: boolean } | undefined> {
  const { clockAdjusted, version, unknownCode, ...columns } = use
  const r = await tx
    .updateTable('transfers')
    .set({
      status: 'USED',
      ...columns,
      used_clock_adjusted: clockAdjusted ? 1 : null,
      used_revoked_code:
        version === undefined ? null : sql<number | null>`case when code_version > ${version} then 1 end`,
      used_unknown_code: unknownCode
        ? 1
        : version === undefined
          ? null
          : sql<number | null>`case when code_version < ${version} then 1 end`,
    })
    .where('id', '=', ticket.id)
    .where('status', '<>', 'USED')
    .returning(['used_revoked_code', 'used_unknown_code'])
    .executeTakeFirst()
  if (!r) return undefined
  await moveToFeedEnd(tx, ticket.id, ticket.eventId)
  return { revokedCode: r.used_revoked_code === 1, unknownCode: r.used_unknown_code === 1 }
}

/** When (epoch ms and local time) a used ticket was used. */
export async function useOf(db: Db, id: number) {
  return db
    .selectFrom('transfers')
    .select(['used_at', 'used_timestamp'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow()
}

/**
 * The latest uses of an event that were scans of a re-issued (revoked) or unknown code, newest first. The
 * condition is the one of the partial index `transfers_code_flagged_uses` (migration 024), with literals
 * rather than parameters so that both databases can prove it and use the index.
 */
export function flaggedCodeUses(db: Db, eventId: number, limit: number, partnerIds?: number[]) {
  if (partnerIds?.length === 0) return Promise.resolve([])
  return db
    .selectFrom('transfers')
    .select([
      'uid',
      'company_ticket_id',
      'used_timestamp',
      'used_gate',
      'code_version',
      'used_revoked_code',
      'used_unknown_code',
    ])
    .where('event_id', '=', eventId)
    .$if(partnerIds !== undefined, (q) => q.where('partner_id', 'in', partnerIds!))
    .where((eb) =>
      eb.or([eb('used_revoked_code', '=', sql.lit(1)), eb('used_unknown_code', '=', sql.lit(1))]),
    )
    .orderBy('used_at', 'desc')
    .limit(limit)
    .execute()
}

// The edge: the scanner sync feed and re-issued codes.

const FEED_COLUMNS = [
  't.id',
  't.uid as transfer_uid',
  'tt.uid as ticket_uid',
  't.code_version',
  't.code_digest',
  't.used_at',
  't.used_timestamp',
  't.used_gate',
  't.feed_seq',
] as const

/** Changes of an event's tickets after `cursor`, oldest first: one row per ticket, its latest state. */
export function feedPage(db: Db, eventId: number, cursor: number, limit: number) {
  return db
    .selectFrom('transfers as t')
    .innerJoin('ticket_types as tt', 'tt.id', 't.ticket_type_id')
    .select(FEED_COLUMNS)
    .where('t.event_id', '=', eventId)
    .where('t.feed_seq', '>', cursor)
    .orderBy('t.feed_seq')
    .limit(limit)
    .execute()
}

export type FeedRow = Awaited<ReturnType<typeof feedPage>>[number]

/**
 * Every ticket of an event as it is now, in id order after `afterId`: the pages of a first sync (a
 * snapshot). Served by the index on (event_id, id) of migration 014.
 */
export function ticketsAfter(db: Db, eventId: number, afterId: number, limit: number) {
  return db
    .selectFrom('transfers as t')
    .innerJoin('ticket_types as tt', 'tt.id', 't.ticket_type_id')
    .select(FEED_COLUMNS)
    .where('t.event_id', '=', eventId)
    .where('t.id', '>', afterId)
    .orderBy('t.id')
    .limit(limit)
    .execute()
}

/**
 * Every ticket of an event in id order, as a first-sync snapshot reads it on SQLite: without its ticket
 * type (the few of the event are read once, `ticketTypeUids`), served by the index on (event_id, id) of
 * migration 014.
 */
export function eventTickets(db: Db, eventId: number) {
  return db
    .selectFrom('transfers as t')
    .select([
      't.id',
      't.uid as transfer_uid',
      't.ticket_type_id',
      't.code_version',
      't.code_digest',
      't.used_at',
      't.used_gate',
    ])
    .where('t.event_id', '=', eventId)
    .orderBy('t.id')
}

/** The uids of an event's ticket types, by id. */
export async function ticketTypeUids(db: Db, eventId: number): Promise<Map<number, string>> {
  const rows = await db
    .selectFrom('ticket_types')
    .select(['id', 'uid'])
    .where('event_id', '=', eventId)
    .execute()
  return new Map(rows.map((r) => [r.id, r.uid]))
}

/**
 * The tickets of an event after transfer id `afterId`, at most `limit`, in id order, gathered by
 * PostgreSQL into a few values: `ids`, the first 16 characters of each transfer uid, and `digests`, each
 * code digest of `digest.chars` characters (`digest.missing` for any other), concatenated; `tickets`,
 * each ticket's `type id,code version,used at` (used at empty when unused), comma-separated; `gates`,
 * the gate of each used ticket in the same order (null for none). `more` says that another ticket
 * follows; `last` is the page's last id. One row for `limit` tickets instead of `limit` rows, which a
 * process would otherwise parse field by field: a first sync of a million tickets reads two hundred
 * rows.
 *
 * No window function numbers the tickets, and no extra row tells whether another page follows (an index
 * probe after the last id does): a million tickets' pages took the database 2.0 s with both, 1.6 s
 * without (paired, page by page, on this project's machine). The aggregates take their rows in the order
 * the subquery hands them (ordered by id, then limited, with no join or grouping between them that could
 * reorder them); an `order by` inside each would sort the page once per aggregate.
 */
export async function ticketColumnsAfter(
  db: Db,
  eventId: number,
  afterId: number,
  limit: number,
  digest: { chars: number; missing: string },
): Promise<GatheredTickets> {
  const { rows } = await sql<GatheredTickets>`select page.*,
      exists(select 1 from transfers n where n.event_id = ${eventId} and n.id > page.last) as more
    from (
      select count(*) as count, max(id) as last,
        coalesce(string_agg(left(uid, 16), ''), '') as ids,
        coalesce(string_agg(case when length(code_digest) = ${digest.chars} then code_digest
          else ${digest.missing} end, ''), '') as digests,
        coalesce(string_agg(ticket_type_id || ',' || code_version || ',' || coalesce(used_at::text, ''), ','), '')
          as tickets,
        coalesce(json_agg(used_gate) filter (where used_at is not null), '[]') as gates
      from (
        select t.id, t.uid, t.code_digest, t.ticket_type_id, t.code_version, t.used_at, t.used_gate
        from transfers t
        where t.event_id = ${eventId} and t.id > ${afterId}
        order by t.id
        limit ${limit}
      ) rows
    ) page`.execute(db)
  return rows[0]!
}

/** A page of an event's tickets gathered by the database (`ticketColumnsAfter`). */
export interface GatheredTickets {
  count: number
  more: boolean
  last: number | null
  ids: string
  digests: string
  /** `type id,code version,used at` of each ticket, comma-separated (used at empty when unused). */
  tickets: string
  /** The gate of each used ticket, in order. */
  gates: (string | null)[]
}

/**
 * Whether the event has more than `n` tickets: one probe of the index on (event_id, id) of migration
 * 014, `n` entries deep, however large the event is.
 */
export async function hasMoreTicketsThan(db: Db, eventId: number, n: number): Promise<boolean> {
  const row = await db
    .selectFrom('transfers')
    .select('id')
    .where('event_id', '=', eventId)
    .orderBy('id')
    .limit(1)
    .offset(n)
    .executeTakeFirst()
  return row !== undefined
}

export function findTransferForReissue(db: Db, partnerId: number, companyTicketId: string) {
  return db
    .selectFrom('transfers as t')
    .innerJoin('ticket_types as tt', 'tt.id', 't.ticket_type_id')
    .select([
      't.id',
      't.uid',
      'tt.uid as ticket_uid',
      'tt.ticket_date',
      't.code_version',
      't.used_timestamp',
      't.used_at',
    ])
    .where('t.partner_id', '=', partnerId)
    .where('t.company_ticket_id', '=', companyTicketId)
    .executeTakeFirst()
}

/**
 * Replaces a transfer's code by the next version, unless it was used or re-issued meanwhile (the
 * conditions make the first of two concurrent re-issues win), and moves it to the end of the sync feed,
 * in the caller's transaction (the feed position last). Returns whether it did.
 */
export async function replaceCode(
  tx: Db,
  t: { id: number; eventId: number; fromVersion: number },
  code: { body: string; digest: string },
): Promise<boolean> {
  const r = await tx
    .updateTable('transfers')
    .set({ code_version: t.fromVersion + 1, code_body: code.body, code_digest: code.digest })
    .where('id', '=', t.id)
    .where('code_version', '=', t.fromVersion)
    .where('used_timestamp', 'is', null)
    .executeTakeFirst()
  if (Number(r.numUpdatedRows) === 0) return false
  await moveToFeedEnd(tx, t.id, t.eventId)
  return true
}

/** Moves a changed transfer to the end of its event's sync feed (last in the transaction, as above). */
async function moveToFeedEnd(tx: Db, transferId: number, eventId: number): Promise<void> {
  await tx
    .updateTable('transfers')
    .set({ feed_seq: await nextFeedSeq(tx, eventId) })
    .where('id', '=', transferId)
    .execute()
}

// The figures of some partners' tickets (a dashboard user bound to a partner sees its partner's only,
// docs/dashboard.md). The event-wide figures come from the counter tables (dashboard/stats.store.ts);
// a partner's are counted from its transfers (transfers_partner_company_ticket_id leads with partner_id).

/** Per ticket type id: the partners' tickets issued, claimed and used, and the balances loaded (minor units). */
export async function partnerTicketFigures(db: Db, eventId: number, partnerIds: number[]) {
  const figures = new Map<
    number,
    { issued: number; claimed: number; used: number; balance: number; promo_balance: number }
  >()
  if (partnerIds.length === 0) return figures
  const rows = await db
    .selectFrom('transfers')
    .select([
      'ticket_type_id',
      sql<number>`count(*)`.as('issued'),
      sql<number>`sum(case when claimed_at is not null then 1 else 0 end)`.as('claimed'),
      sql<number>`sum(case when used_at is not null then 1 else 0 end)`.as('used'),
      sql<number>`coalesce(sum(balance), 0)`.as('balance'),
      sql<number>`coalesce(sum(promo_balance), 0)`.as('promo_balance'),
    ])
    .where('partner_id', 'in', partnerIds)
    .where('event_id', '=', eventId)
    .groupBy('ticket_type_id')
    .execute()
  for (const r of rows)
    figures.set(Number(r.ticket_type_id), {
      issued: Number(r.issued),
      claimed: Number(r.claimed),
      used: Number(r.used),
      balance: Number(r.balance),
      promo_balance: Number(r.promo_balance),
    })
  return figures
}

/** The partners' uses per slot of `slotMs` in [from, to), keyed by the slot's start (epoch ms). */
export async function partnerUsesPerSlot(
  db: Db,
  eventId: number,
  partnerIds: number[],
  slotMs: number,
  from: number,
  to: number,
) {
  if (partnerIds.length === 0) return new Map<number, number>()
  const slot = sql<number>`used_at / ${sql.lit(slotMs)}`
  const rows = await db
    .selectFrom('transfers')
    .select([slot.as('slot'), sql<number>`count(*)`.as('n')])
    .where('partner_id', 'in', partnerIds)
    .where('event_id', '=', eventId)
    .where('used_at', '>=', Math.floor(from / slotMs) * slotMs)
    .where('used_at', '<', Math.ceil(to / slotMs) * slotMs)
    .groupBy(slot)
    .execute()
  return new Map(rows.map((r) => [Number(r.slot) * slotMs, Number(r.n)]))
}

/** The partners' uses by gate: the gate the scan named, else the gate printed on the ticket (null: none). */
export async function partnerUsesPerGate(db: Db, eventId: number, partnerIds: number[]) {
  if (partnerIds.length === 0) return []
  const gate = sql<string | null>`coalesce(used_gate, access_gate)`
  const rows = await db
    .selectFrom('transfers')
    .select([gate.as('gate'), sql<number>`count(*)`.as('n')])
    .where('partner_id', 'in', partnerIds)
    .where('event_id', '=', eventId)
    .where('used_at', 'is not', null)
    .groupBy(gate)
    .execute()
  return rows.map((r) => ({ access_gate: r.gate, count: Number(r.n) }))
}
