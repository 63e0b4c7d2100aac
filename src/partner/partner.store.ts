import type { Db } from '../platform/db/database.js'

export async function insertTicketType(
  db: Db,
  t: { uid: string; event_id: number; name: string; price: number; ticket_date: string; created_at: number },
) {
  await db.insertInto('ticket_types').values(t).execute()
}

export function listTicketTypes(db: Db, eventId: number) {
  return db
    .selectFrom('ticket_types')
    .select(['uid', 'name', 'price', 'ticket_date', 'created_at'])
    .where('event_id', '=', eventId)
    .orderBy('id')
    .execute()
}

export function findTicketType(db: Db, eventId: number, uid: string) {
  return db
    .selectFrom('ticket_types')
    .select(['id', 'uid', 'ticket_date'])
    .where('event_id', '=', eventId)
    .where('uid', '=', uid)
    .executeTakeFirst()
}

/** The ticket types of an event among `uids`, by uid. */
export async function findTicketTypes(db: Db, eventId: number, uids: string[]) {
  const rows = uids.length
    ? await db
        .selectFrom('ticket_types')
        .select(['id', 'uid', 'ticket_date'])
        .where('event_id', '=', eventId)
        .where('uid', 'in', uids)
        .execute()
    : []
  return new Map(rows.map((r) => [r.uid, r]))
}
