import { nextFeedSeq } from '../events/events.store.js'
import type { Db } from '../platform/db/database.js'

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
 * conditions make the first of two concurrent re-issues win). Returns whether it did.
 */
export async function replaceCode(
  db: Db,
  t: { id: number; eventId: number; fromVersion: number },
  code: { body: string; digest: string },
): Promise<boolean> {
  return db.transaction().execute(async (tx) => {
    const r = await tx
      .updateTable('transfers')
      .set({ code_version: t.fromVersion + 1, code_body: code.body, code_digest: code.digest })
      .where('id', '=', t.id)
      .where('code_version', '=', t.fromVersion)
      .where('used_timestamp', 'is', null)
      .executeTakeFirst()
    if (Number(r.numUpdatedRows) === 0) return false
    await markChanged(tx, t.id, t.eventId)
    return true
  })
}

/** Moves a changed transfer to the end of its event's sync feed (last in the transaction, as above). */
export async function markChanged(tx: Db, transferId: number, eventId: number): Promise<void> {
  await tx
    .updateTable('transfers')
    .set({ feed_seq: await nextFeedSeq(tx, eventId) })
    .where('id', '=', transferId)
    .execute()
}
