import type { Db } from '../platform/db/database.js'

export async function findAdminByEmail(db: Db, email: string) {
  return db
    .selectFrom('administrators')
    .select(['id', 'email'])
    .where('email', '=', email)
    .where('disabled', '=', 0)
    .executeTakeFirst()
}

/**
 * Holds the administrator's row until the transaction ends, so that concurrent reset requests for
 * one administrator count and insert one after another (a no-op write locks the row on PostgreSQL;
 * SQLite runs one write transaction at a time anyway).
 */
export async function lockAdmin(db: Db, adminId: number): Promise<void> {
  await db
    .updateTable('administrators')
    .set((eb) => ({ updated_at: eb.ref('updated_at') }))
    .where('id', '=', adminId)
    .execute()
}

/** Creation times of the administrator's reset tokens since `since`, oldest first. */
export async function recentRequests(db: Db, adminId: number, since: number): Promise<number[]> {
  const rows = await db
    .selectFrom('password_reset_tokens')
    .select('created_at')
    .where('admin_id', '=', adminId)
    .where('created_at', '>', since)
    .orderBy('created_at')
    .execute()
  return rows.map((r) => r.created_at)
}

export async function insertResetToken(
  db: Db,
  row: { admin_id: number; token_hash: string; expires_at: number; created_at: number },
): Promise<void> {
  await db.insertInto('password_reset_tokens').values(row).execute()
}

/** The live token with this hash whose administrator still exists and is enabled. */
export async function findUsableToken(db: Db, tokenHash: string, now: number) {
  return db
    .selectFrom('password_reset_tokens as t')
    .innerJoin('administrators as a', 'a.id', 't.admin_id')
    .select(['t.id', 't.admin_id', 'a.email'])
    .where('t.token_hash', '=', tokenHash)
    .where('t.used_at', 'is', null)
    .where('t.expires_at', '>', now)
    .where('a.disabled', '=', 0)
    .executeTakeFirst()
}

/** Marks the token used; false when another request used it first. */
export async function consumeToken(db: Db, id: number, now: number): Promise<boolean> {
  const r = await db
    .updateTable('password_reset_tokens')
    .set({ used_at: now })
    .where('id', '=', id)
    .where('used_at', 'is', null)
    .executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}

/** Ends every other outstanding link of the administrator once the password has changed. */
export async function retireTokens(db: Db, adminId: number, now: number): Promise<void> {
  await db
    .updateTable('password_reset_tokens')
    .set({ used_at: now })
    .where('admin_id', '=', adminId)
    .where('used_at', 'is', null)
    .execute()
}

export async function setAdminPassword(db: Db, adminId: number, hash: string, now: number): Promise<void> {
  await db
    .updateTable('administrators')
    .set({ password_hash: hash, updated_at: now })
    .where('id', '=', adminId)
    .execute()
}
