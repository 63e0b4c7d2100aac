import type { Db } from '../platform/db/database.js'
import { deleteDueBatch, type PruneCursor, type Pruned } from '../platform/db/prune.js'
import { sha256Hex } from '../platform/digest.js'
import { claimTickets } from '../transfers/transfers.store.js'

/** The link a claim token opens, found by the token's hash. */
export function findLinkByToken(db: Db, token: string) {
  return db
    .selectFrom('holder_link_tokens as k')
    .innerJoin('holder_links as l', 'l.id', 'k.link_id')
    .innerJoin('events as e', 'e.id', 'l.event_id')
    .select([
      'l.id',
      'l.email',
      'l.claimed_by',
      'l.claimed_at',
      'l.event_id',
      'e.uid as event_uid',
      'e.name as event_name',
    ])
    .where('k.token_hash', '=', sha256Hex(token))
    .executeTakeFirst()
}

export function walletsOf(db: Db, customerId: number) {
  return db
    .selectFrom('wallets as w')
    .innerJoin('events as e', 'e.id', 'w.event_id')
    .select(['e.uid as event_uid', 'e.name as event_name', 'w.balance', 'w.promo_balance', 'w.updated_at'])
    .where('w.customer_id', '=', customerId)
    .orderBy('w.event_id')
    .execute()
}

/**
 * Claims a link for a consumer, in the caller's transaction: exactly one consumer wins (conditional
 * UPDATE on claimed_at), and the link's tickets and the sum of their balances move to that consumer.
 * Returns false when another consumer claimed it first.
 */
export async function claimLink(tx: Db, linkId: number, eventId: number, customerId: number, now: number) {
  const r = await tx
    .updateTable('holder_links')
    .set({ claimed_by: customerId, claimed_at: now, updated_at: now })
    .where('id', '=', linkId)
    .where('claimed_at', 'is', null)
    .executeTakeFirst()
  if (Number(r.numUpdatedRows) === 0) {
    const link = await tx
      .selectFrom('holder_links')
      .select('claimed_by')
      .where('id', '=', linkId)
      .executeTakeFirstOrThrow()
    return link.claimed_by === customerId
  }
  // The link's tokens learn the claim too: retention deletes them RETENTION_DAYS after it, by an
  // index of their own that holds nothing else (pruneClaimedLinkTokens).
  await tx.updateTable('holder_link_tokens').set({ claimed_at: now }).where('link_id', '=', linkId).execute()
  const { balance, promo } = await claimTickets(tx, linkId, customerId, now)
  await tx
    .insertInto('wallets')
    .values({ customer_id: customerId, event_id: eventId, balance, promo_balance: promo, updated_at: now })
    .onConflict((oc) =>
      oc.columns(['customer_id', 'event_id']).doUpdateSet((eb) => ({
        balance: eb('wallets.balance', '+', balance),
        promo_balance: eb('wallets.promo_balance', '+', promo),
        updated_at: now,
      })),
    )
    .execute()
  return true
}

/**
 * The open link of an address in an event, created when missing. The upsert also takes the link's row
 * lock on PostgreSQL, which orders a transfer against a concurrent claim or grouping e-mail of the link.
 */
export async function openLink(db: Db, eventId: number, email: string, now: number): Promise<number> {
  const r = await db
    .insertInto('holder_links')
    .values({ event_id: eventId, email, created_at: now, updated_at: now })
    .onConflict((oc) =>
      oc.columns(['event_id', 'email']).where('claimed_at', 'is', null).doUpdateSet({ updated_at: now }),
    )
    .returning('id')
    .executeTakeFirstOrThrow()
  return r.id
}

/**
 * The open links of many addresses of an event (each created when missing), by address, in one
 * statement per 200 addresses; give the addresses sorted, so concurrent batches lock links in the
 * same order.
 */
export async function openLinks(db: Db, eventId: number, emails: string[], now: number) {
  const links = new Map<string, number>()
  for (let i = 0; i < emails.length; i += 200) {
    const rows = await db
      .insertInto('holder_links')
      .values(
        emails
          .slice(i, i + 200)
          .map((email) => ({ event_id: eventId, email, created_at: now, updated_at: now })),
      )
      .onConflict((oc) =>
        oc.columns(['event_id', 'email']).where('claimed_at', 'is', null).doUpdateSet({ updated_at: now }),
      )
      .returning(['id', 'email'])
      .execute()
    for (const r of rows) links.set(r.email, r.id)
  }
  return links
}

/** Holds a link's row for the rest of the transaction (the transfer mail's grouping); null when gone. */
export async function holdLink(tx: Db, linkId: number, now: number) {
  const link = await tx
    .updateTable('holder_links')
    .set({ updated_at: now })
    .where('id', '=', linkId)
    .returning(['email', 'event_id'])
    .executeTakeFirst()
  return link ?? null
}

/** Stores the hash of a claim token mailed for a link. */
export async function insertLinkToken(tx: Db, linkId: number, tokenHash: string, now: number): Promise<void> {
  await tx
    .insertInto('holder_link_tokens')
    .values({ token_hash: tokenHash, link_id: linkId, created_at: now })
    .execute()
}

/** Drops a claim token (its mail was never sent). */
export async function deleteLinkToken(tx: Db, tokenHash: string): Promise<void> {
  await tx.deleteFrom('holder_link_tokens').where('token_hash', '=', tokenHash).execute()
}

/**
 * Deletes up to `limit` claim-link tokens of links claimed before `before` (the tickets are in the
 * claimer's account); the token of a link nobody claimed yet stays, however old. The tokens carry
 * their link's claim time (set by `claimLink`) under a partial index that holds only claimed ones, so
 * a pass reads only what it deletes, however many old unclaimed or already pruned links there are.
 */
export function pruneClaimedLinkTokens(
  db: Db,
  before: number,
  limit: number,
  after?: PruneCursor,
): Promise<Pruned> {
  return deleteDueBatch(
    db,
    { table: 'holder_link_tokens', time: 'claimed_at', key: 'token_hash', keyType: 'text' },
    before,
    limit,
    after,
  )
}
