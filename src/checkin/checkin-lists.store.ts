import type { Db } from '../platform/db/database.js'
import type { CheckinListsTable } from '../platform/db/schema.js'

/*
 * The check-in lists of events (docs/gate.md, "Lists"): the one module that queries `checkin_lists`.
 * Every event has its default list, created the first time it is asked for (the migration made those of
 * the events it found).
 */

export type CheckinListRow = Omit<CheckinListsTable, 'id'> & { id: number }

/** The default list's name, as GET /events/{event_id}/checkin-lists shows it. */
export const DEFAULT_LIST_NAME = 'Default'

const ALL = [
  'id',
  'event_id',
  'default_of',
  'name',
  'ticket_type_ids',
  'allow_multiple_entries',
  'allow_entry_after_exit',
  'windows',
  'exit_all_at',
  'counted_out_until',
  'archived_at',
  'created_at',
  'updated_at',
] as const

/**
 * The event's default list, created now when it has none (of concurrent creators one inserts; the
 * unique `default_of` makes the others' inserts do nothing).
 */
export async function defaultList(db: Db, eventId: number, now: number): Promise<CheckinListRow> {
  const found = await db
    .selectFrom('checkin_lists')
    .select(ALL)
    .where('default_of', '=', eventId)
    .executeTakeFirst()
  if (found) return found
  await db
    .insertInto('checkin_lists')
    .values({
      event_id: eventId,
      default_of: eventId,
      name: DEFAULT_LIST_NAME,
      allow_multiple_entries: 0,
      allow_entry_after_exit: 0,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.column('default_of').doNothing())
    .execute()
  return db
    .selectFrom('checkin_lists')
    .select(ALL)
    .where('default_of', '=', eventId)
    .executeTakeFirstOrThrow()
}

/** A list by id (archived ones included); undefined when there is none. */
export function findList(db: Db, id: number): Promise<CheckinListRow | undefined> {
  return db.selectFrom('checkin_lists').select(ALL).where('id', '=', id).executeTakeFirst()
}

/** An event's lists, the default first, then by id; archived ones only when asked for. */
export function listsOf(db: Db, eventId: number, archived = false): Promise<CheckinListRow[]> {
  return db
    .selectFrom('checkin_lists')
    .select(ALL)
    .where('event_id', '=', eventId)
    .$if(!archived, (q) => q.where('archived_at', 'is', null))
    .orderBy('default_of')
    .orderBy('id')
    .execute()
    .then((rows) => [
      ...rows.filter((r) => r.default_of !== null),
      ...rows.filter((r) => r.default_of === null),
    ])
}

export type NewList = Pick<
  CheckinListsTable,
  | 'event_id'
  | 'name'
  | 'ticket_type_ids'
  | 'allow_multiple_entries'
  | 'allow_entry_after_exit'
  | 'windows'
  | 'exit_all_at'
  | 'created_at'
  | 'updated_at'
>

export async function insertList(db: Db, list: NewList): Promise<number> {
  const r = await db.insertInto('checkin_lists').values(list).returning('id').executeTakeFirstOrThrow()
  return r.id
}

export type ListChange = Partial<
  Pick<
    CheckinListsTable,
    | 'name'
    | 'ticket_type_ids'
    | 'allow_multiple_entries'
    | 'allow_entry_after_exit'
    | 'windows'
    | 'exit_all_at'
  >
>

/**
 * Changes a list that is not archived, or archives it (`archived_at`: it keeps its scans and counts);
 * whether it did.
 */
export async function updateList(
  db: Db,
  id: number,
  change: ListChange | Pick<CheckinListsTable, 'archived_at'>,
  now: number,
): Promise<boolean> {
  const r = await db
    .updateTable('checkin_lists')
    .set({ ...change, updated_at: now })
    .where('id', '=', id)
    .where('archived_at', 'is', null)
    .executeTakeFirst()
  return Number(r.numUpdatedRows) > 0
}

/**
 * Claims the count-out of the list at `moment` (an `exit_all_at` moment, event-local): true for the one
 * transaction that moves the list's mark up to it, which then counts out everyone inside before it.
 */
export async function claimCountOut(tx: Db, id: number, moment: string): Promise<boolean> {
  const r = await tx
    .updateTable('checkin_lists')
    .set({ counted_out_until: moment })
    .where('id', '=', id)
    .where((eb) => eb.or([eb('counted_out_until', 'is', null), eb('counted_out_until', '<', moment)]))
    .executeTakeFirst()
  return Number(r.numUpdatedRows) > 0
}
