import { deleteLinkToken, holdLink, insertLinkToken } from '../holder/holder.store.js'
import type { Db } from '../platform/db/database.js'
import type { TransfersTable } from '../platform/db/schema.js'

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

export async function insertTransfer(
  db: Db,
  t: Pick<
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
  > & { feed_seq: number; partner_id: number },
) {
  await db
    .insertInto('transfers')
    .values({ ...t, status: 'TRANSFERRED' })
    .execute()
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

/** Many transfers in one statement per 100 (the caller's transaction). */
export async function insertTransfers(db: Db, rows: Parameters<typeof insertTransfer>[1][]) {
  for (let i = 0; i < rows.length; i += 100)
    await db
      .insertInto('transfers')
      .values(rows.slice(i, i + 100).map((t) => ({ ...t, status: 'TRANSFERRED' })))
      .execute()
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
    const ids = await tx
      .updateTable('transfers')
      .set({ mailed_at: now })
      .where('link_id', '=', linkId)
      .where('mailed_at', 'is', null)
      .returning('id')
      .execute()
    if (ids.length === 0) return null
    await insertLinkToken(tx, linkId, tokenHash, now)
    return { link, ids: ids.map((r) => r.id) }
  })
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

/** Undoes takeTransfersToMail after a failed send: the transfers are mailed again, the token is dropped. */
export async function releaseTakenTransfers(db: Db, ids: number[], takenAt: number, tokenHash: string) {
  await db.transaction().execute(async (tx) => {
    await tx
      .updateTable('transfers')
      .set({ mailed_at: null })
      .where('id', 'in', ids)
      .where('mailed_at', '=', takenAt)
      .execute()
    await deleteLinkToken(tx, tokenHash)
  })
}
