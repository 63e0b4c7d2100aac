import { deleteLinkToken, holdLink, insertLinkToken } from '../holder/holder.store.js'
import type { Db } from '../platform/db/database.js'
import { releaseUnmailed, takeUnmailed } from '../transfers/transfers.store.js'

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

// Transfer mail: one e-mail per holder link with the transfers not yet mailed. The link is the holder's,
// the transfers the ledger's; these take both in one transaction.

/**
 * Takes the link's not-yet-mailed transfers for one e-mail and stores the hash of the claim token it
 * will carry; null when the link is gone or nothing is left to mail. Holds the link's row so that a
 * transfer committed meanwhile waits for this transaction (see transferMailJob).
 */
export async function takeTransfersToMail(
  db: Db,
  linkId: number,
  tokenHash: string,
  now: number,
  /** Runs in the transaction once the link's row is held, before the transfers are taken. */
  onLinkHeld: (tx: Db) => Promise<void>,
) {
  return db.transaction().execute(async (tx) => {
    const link = await holdLink(tx, linkId, now)
    if (!link) return null
    await onLinkHeld(tx)
    const ids = await takeUnmailed(tx, linkId, now)
    if (ids.length === 0) return null
    await insertLinkToken(tx, linkId, tokenHash, now)
    return { link, ids }
  })
}

/** Undoes takeTransfersToMail after a failed send: the transfers are mailed again, the token is dropped. */
export async function releaseTakenTransfers(db: Db, ids: number[], takenAt: number, tokenHash: string) {
  await db.transaction().execute(async (tx) => {
    await releaseUnmailed(tx, ids, takenAt)
    await deleteLinkToken(tx, tokenHash)
  })
}
