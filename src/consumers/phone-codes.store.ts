import type { Insertable } from 'kysely'
import type { Db } from '../platform/db/database.js'
import type { PhoneCodesTable } from '../platform/db/schema.js'

/** When the codes of this phone and purpose created after `since` were created, oldest first. */
export async function codeTimesSince(
  db: Db,
  phone: string,
  purpose: string,
  since: number,
): Promise<number[]> {
  const rows = await db
    .selectFrom('phone_codes')
    .select('created_at')
    .where('phone', '=', phone)
    .where('purpose', '=', purpose)
    .where('created_at', '>', since)
    .orderBy('created_at')
    .execute()
  return rows.map((r) => r.created_at)
}

/**
 * Stores a new code, in the caller's transaction: the phone's live codes of the same purpose are
 * consumed (they stop working), and its codes created before `forgetBefore` are deleted.
 */
export async function replaceCode(
  tx: Db,
  code: Insertable<PhoneCodesTable>,
  forgetBefore: number,
): Promise<void> {
  await tx
    .updateTable('phone_codes')
    .set({ consumed_at: code.created_at })
    .where('phone', '=', code.phone)
    .where('purpose', '=', code.purpose)
    .where('consumed_at', 'is', null)
    .execute()
  await tx
    .deleteFrom('phone_codes')
    .where('phone', '=', code.phone)
    .where('created_at', '<', forgetBefore)
    .execute()
  await tx.insertInto('phone_codes').values(code).execute()
}

/** The phone's latest unconsumed code of this purpose (maybe expired). */
export async function findLatestCode(db: Db, phone: string, purpose: string) {
  return db
    .selectFrom('phone_codes')
    .select(['id', 'code_hash', 'attempts', 'expires_at'])
    .where('phone', '=', phone)
    .where('purpose', '=', purpose)
    .where('consumed_at', 'is', null)
    .orderBy('id', 'desc')
    .executeTakeFirst()
}

const live = (db: Db, id: number, now: number) =>
  db
    .updateTable('phone_codes')
    .where('id', '=', id)
    .where('consumed_at', 'is', null)
    .where('expires_at', '>', now)

/** Counts one try at a live code, unless it has had `maxTries`; false when not counted. */
export async function countTry(db: Db, id: number, now: number, maxTries: number): Promise<boolean> {
  const r = await live(db, id, now)
    .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
    .where('attempts', '<', maxTries)
    .executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}

/** Consumes a live code; false when another request consumed it first or it expired. */
export async function consumeCode(db: Db, id: number, now: number): Promise<boolean> {
  const r = await live(db, id, now).set({ consumed_at: now }).executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}
