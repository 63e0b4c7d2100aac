import type { Db } from '../platform/db/database.js'

/**
 * Counts one reset request of the address with this hash against the hourly quota, in the caller's
 * transaction. Returns null when it is within the quota (and records it), or the milliseconds until
 * the oldest counted request leaves the hour. The upsert holds the address's row until the
 * transaction ends, so concurrent requests for one address count one after another (a write locks the
 * row on PostgreSQL; SQLite runs one write transaction at a time anyway).
 */
export async function countRequest(
  db: Db,
  addressHash: string,
  now: number,
  windowMs: number,
  quota: number,
): Promise<number | null> {
  await db
    .insertInto('password_reset_requests')
    .values({ address_hash: addressHash, times: '[]', updated_at: now })
    .onConflict((oc) =>
      oc.column('address_hash').doUpdateSet((eb) => ({ address_hash: eb.ref('excluded.address_hash') })),
    )
    .execute()
  const row = await db
    .selectFrom('password_reset_requests')
    .select('times')
    .where('address_hash', '=', addressHash)
    .executeTakeFirstOrThrow()
  const recent = (JSON.parse(row.times) as number[]).filter((at) => at > now - windowMs)
  if (recent.length >= quota) return recent[recent.length - quota]! + windowMs - now
  recent.push(now)
  await db
    .updateTable('password_reset_requests')
    .set({ times: JSON.stringify(recent), updated_at: now })
    .where('address_hash', '=', addressHash)
    .execute()
  return null
}

/** Forgets addresses with no request since `before`. */
export async function pruneRequests(db: Db, before: number): Promise<void> {
  await db.deleteFrom('password_reset_requests').where('updated_at', '<', before).execute()
}

export async function insertResetToken(
  db: Db,
  row: { admin_id: number; token_hash: string; expires_at: number; created_at: number },
): Promise<void> {
  await db.insertInto('password_reset_tokens').values(row).execute()
}

export async function deleteResetToken(db: Db, tokenHash: string): Promise<void> {
  await db.deleteFrom('password_reset_tokens').where('token_hash', '=', tokenHash).execute()
}

/** The live (unused, unexpired) token with this hash. Whether its administrator may still reset is the
 * identities store's to say. */
export async function findLiveToken(db: Db, tokenHash: string, now: number) {
  return db
    .selectFrom('password_reset_tokens')
    .select(['id', 'admin_id'])
    .where('token_hash', '=', tokenHash)
    .where('used_at', 'is', null)
    .where('expires_at', '>', now)
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
