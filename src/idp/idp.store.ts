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

/**
 * The oldest consumer with this proven e-mail address that has no other account of the same
 * provider linked. Self-asserted addresses never match: otherwise anyone could register with a
 * victim's address and be handed the victim's provider sign-in.
 */
export async function findCustomerByProvenEmail(
  db: Db,
  email: string,
  issuer: string,
): Promise<number | null> {
  const r = await db
    .selectFrom('customers')
    .select('id')
    .where('email', '=', email)
    .where('email_self_asserted', '=', 0)
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('customer_identities')
            .select('customer_identities.id')
            .whereRef('customer_identities.customer_id', '=', 'customers.id')
            .where('customer_identities.issuer', '=', issuer),
        ),
      ),
    )
    .orderBy('id')
    .executeTakeFirst()
  return r?.id ?? null
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
