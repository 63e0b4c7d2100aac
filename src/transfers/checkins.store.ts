import type { Db } from '../platform/db/database.js'
import type { CheckinsTable } from '../platform/db/schema.js'

/*
 * The scans of the ticket ledger (docs/gate.md): every scan on a check-in list, accepted or refused
 * (`checkins`), whether a ticket is inside a list's area (`checkin_presence`) and the counters a list's
 * status reads in O(1) (`checkin_counts`). Written with the ticket's use, in the scan's transaction;
 * the ledger's folder is the one writer of these tables as of `transfers`.
 */

export type NewCheckin = Omit<CheckinsTable, 'id'>

/**
 * Takes the ticket's place on the list for the scan's transaction and answers since when it is inside
 * (null: out): the row is created when missing and locked (PostgreSQL; SQLite's one writer serialises
 * anyway), so two scans of one ticket on one list are decided one after the other.
 */
export async function lockPresence(tx: Db, listId: number, transferId: number): Promise<string | null> {
  const r = await tx
    .insertInto('checkin_presence')
    .values({ list_id: listId, transfer_id: transferId, inside_since: null })
    .onConflict((oc) =>
      oc
        .columns(['list_id', 'transfer_id'])
        .doUpdateSet((eb) => ({ inside_since: eb.ref('checkin_presence.inside_since') })),
    )
    .returning('inside_since')
    .executeTakeFirstOrThrow()
  return r.inside_since
}

export async function setPresence(tx: Db, listId: number, transferId: number, since: string | null) {
  await tx
    .updateTable('checkin_presence')
    .set({ inside_since: since })
    .where('list_id', '=', listId)
    .where('transfer_id', '=', transferId)
    .execute()
}

/** The ticket's accepted scans on the list, in the order they were recorded. */
export function acceptedScans(tx: Db, listId: number, transferId: number) {
  return tx
    .selectFrom('checkins')
    .select(['direction', 'local_at'])
    .where('list_id', '=', listId)
    .where('transfer_id', '=', transferId)
    .where('result', '=', 'accepted')
    .orderBy('id')
    .execute()
}

/** The scan recorded under an upload's nonce, if any. */
export function checkinByNonce(db: Db, nonce: string) {
  return db
    .selectFrom('checkins')
    .select([
      'id',
      'list_id',
      'transfer_id',
      'direction',
      'result',
      'reason',
      'first_use',
      'scanned_at',
      'local_at',
    ])
    .where('nonce', '=', nonce)
    .executeTakeFirst()
}

export async function recordCheckin(tx: Db, scan: NewCheckin): Promise<number> {
  const r = await tx.insertInto('checkins').values(scan).returning('id').executeTakeFirstOrThrow()
  return r.id
}

/** Adds to a list's counters in one statement (measures in a fixed order; zero deltas left out). */
export async function addCounts(tx: Db, listId: number, deltas: Record<string, number>): Promise<void> {
  const rows = Object.entries(deltas)
    .filter(([, n]) => n !== 0)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([measure, n]) => ({ list_id: listId, measure, n }))
  if (rows.length === 0) return
  await tx
    .insertInto('checkin_counts')
    .values(rows)
    .onConflict((oc) =>
      oc
        .columns(['list_id', 'measure'])
        .doUpdateSet((eb) => ({ n: eb('checkin_counts.n', '+', eb.ref('excluded.n')) })),
    )
    .execute()
}

/**
 * Counts out everyone inside the list's area who entered before `moment` (event-local, an `exit_all_at`
 * moment): they are out, and the counters say so. Answers how many.
 */
export async function countOut(tx: Db, listId: number, moment: string): Promise<number> {
  const r = await tx
    .updateTable('checkin_presence')
    .set({ inside_since: null })
    .where('list_id', '=', listId)
    .where('inside_since', '<', moment)
    .executeTakeFirst()
  const n = Number(r.numUpdatedRows)
  await addCounts(tx, listId, { inside: -n, counted_out: n })
  return n
}

/** A list's counters by measure (a few rows: the totals, the refusal reasons and the hours scanned). */
export async function countsOf(db: Db, listId: number): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom('checkin_counts')
    .select(['measure', 'n'])
    .where('list_id', '=', listId)
    .execute()
  return new Map(rows.map((r) => [r.measure, Number(r.n)]))
}

export interface CheckinFilter {
  listId?: number
  result?: string
  reason?: string
  deviceId?: string
}

/** A page of an event's scans, newest first, before the id `before` (none: from the newest). */
export function checkinPage(
  db: Db,
  eventId: number,
  filter: CheckinFilter,
  before: number | undefined,
  limit: number,
) {
  return db
    .selectFrom('checkins')
    .select([
      'id',
      'list_id',
      'transfer_uid',
      'direction',
      'result',
      'reason',
      'first_use',
      'scanned_at',
      'local_at',
      'gate',
      'device_id',
      'actor',
      'offline',
      'nonce',
    ])
    .where('event_id', '=', eventId)
    .$if(filter.listId !== undefined, (q) => q.where('list_id', '=', filter.listId!))
    .$if(filter.result !== undefined, (q) => q.where('result', '=', filter.result!))
    .$if(filter.reason !== undefined, (q) => q.where('reason', '=', filter.reason!))
    .$if(filter.deviceId !== undefined, (q) => q.where('device_id', '=', filter.deviceId!))
    .$if(before !== undefined, (q) => q.where('id', '<', before!))
    .orderBy('id', 'desc')
    .limit(limit)
    .execute()
}
