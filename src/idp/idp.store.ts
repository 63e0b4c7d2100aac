import type { Db } from '../platform/db/database.js'

export async function findLinkedCustomer(db: Db, issuer: string, subject: string): Promise<number | null> {
  const r = await db
    .selectFrom('customer_identities')
    .select('customer_id')
    .where('issuer', '=', issuer)
    .where('subject', '=', subject)
    .executeTakeFirst()
  return r?.customer_id ?? null
}

export async function touchIdentity(db: Db, issuer: string, subject: string, now: number): Promise<void> {
  await db
    .updateTable('customer_identities')
    .set({ last_login_at: now })
    .where('issuer', '=', issuer)
    .where('subject', '=', subject)
    .execute()
}

/** The issuers of the external accounts linked to a consumer, in the order they were linked. */
export async function identityIssuers(db: Db, customerId: number): Promise<string[]> {
  const rows = await db
    .selectFrom('customer_identities')
    .select('issuer')
    .where('customer_id', '=', customerId)
    .orderBy('id')
    .execute()
  return rows.map((r) => r.issuer)
}

/** Of these consumers, those that already have an account of this issuer linked. */
export async function linkedToIssuer(db: Db, customerIds: number[], issuer: string): Promise<Set<number>> {
  if (customerIds.length === 0) return new Set()
  const rows = await db
    .selectFrom('customer_identities')
    .select('customer_id')
    .where('customer_id', 'in', customerIds)
    .where('issuer', '=', issuer)
    .execute()
  return new Set(rows.map((r) => r.customer_id))
}

export async function insertIdentity(
  db: Db,
  row: { customer_id: number; issuer: string; subject: string; email: string | null; now: number },
): Promise<void> {
  await db
    .insertInto('customer_identities')
    .values({
      customer_id: row.customer_id,
      issuer: row.issuer,
      subject: row.subject,
      email: row.email,
      created_at: row.now,
      last_login_at: row.now,
    })
    .execute()
}
