import type { Db } from '../platform/db/database.js'
import { deleteDueBatch, type PruneCursor, type Pruned } from '../platform/db/prune.js'

/**
 * A new set-up code (its SHA-256) for a device; the device's earlier codes that were not used are
 * removed, so a device has at most one code waiting.
 */
export async function insertSetupCode(
  db: Db,
  row: { device_id: number; code_hash: string; created_by: string; created_at: number; expires_at: number },
): Promise<void> {
  await db
    .deleteFrom('device_setup_codes')
    .where('device_id', '=', row.device_id)
    .where('used_at', 'is', null)
    .execute()
  await db.insertInto('device_setup_codes').values(row).execute()
}

/**
 * Takes the code with this hash if it is unused and unexpired: exactly one of concurrent takers gets its
 * device id (the UPDATE's condition is re-checked on the row it waited for); undefined for the others,
 * and for a code that is unknown, used or expired.
 */
export async function takeSetupCode(db: Db, codeHash: string, now: number): Promise<number | undefined> {
  const row = await db
    .updateTable('device_setup_codes')
    .set({ used_at: now })
    .where('code_hash', '=', codeHash)
    .where('used_at', 'is', null)
    .where('expires_at', '>', now)
    .returning('device_id')
    .executeTakeFirst()
  return row?.device_id
}

/** Whether a code with this hash exists, and why it cannot be taken (for the audit record). */
export async function setupCodeState(
  db: Db,
  codeHash: string,
): Promise<{ device_id: number; used: boolean } | undefined> {
  const row = await db
    .selectFrom('device_setup_codes')
    .select(['device_id', 'used_at'])
    .where('code_hash', '=', codeHash)
    .executeTakeFirst()
  return row && { device_id: row.device_id, used: row.used_at !== null }
}

/** Retention: codes past their expiry, used or not, are of no use to anyone (the audit log keeps who). */
export function pruneSetupCodes(db: Db, before: number, limit: number, after?: PruneCursor): Promise<Pruned> {
  return deleteDueBatch(
    db,
    { table: 'device_setup_codes', time: 'expires_at', key: 'id', keyType: 'integer' },
    before,
    limit,
    after,
  )
}
