import type { Db } from '../platform/db/database.js'

/** A ticket (transfer) by its uid, with its event's uid and time zone, for a scan. */
export function findTransferToUse(db: Db, transferUid: string) {
  return db
    .selectFrom('transfers as t')
    .innerJoin('events as e', 'e.id', 't.event_id')
    .select([
      't.id',
      't.event_id',
      't.email',
      't.company_ticket_id',
      't.used_timestamp',
      'e.uid',
      'e.timezone',
    ])
    .where('t.uid', '=', transferUid)
    .executeTakeFirst()
}

/** Marks a ticket used unless it already is; false when another scan used it first. */
export async function markUsed(
  db: Db,
  id: number,
  use: { used_at: number; used_timestamp: string; used_gate: string | null },
): Promise<boolean> {
  const r = await db
    .updateTable('transfers')
    .set({ status: 'USED', ...use })
    .where('id', '=', id)
    .where('status', '<>', 'USED')
    .executeTakeFirst()
  return Number(r.numUpdatedRows) !== 0
}

/** The local time a used ticket was used at. */
export async function usedTimestampOf(db: Db, id: number): Promise<string | null> {
  const r = await db
    .selectFrom('transfers')
    .select('used_timestamp')
    .where('id', '=', id)
    .executeTakeFirstOrThrow()
  return r.used_timestamp
}
