import type { Db } from '../platform/db/database.js'

export interface MfaRow {
  admin_id: number
  active_secret: string | null
  active_last_step: number | null
  pending_secret: string | null
}

export interface MfaAdmin {
  id: number
  email: string
}

export async function findActiveAdmin(db: Db, id: number): Promise<MfaAdmin | undefined> {
  return db
    .selectFrom('administrators')
    .select(['id', 'email'])
    .where('id', '=', id)
    .where('disabled', '=', 0)
    .executeTakeFirst()
}

export async function getMfa(db: Db, adminId: number): Promise<MfaRow | undefined> {
  return db
    .selectFrom('admin_mfa')
    .select(['admin_id', 'active_secret', 'active_last_step', 'pending_secret'])
    .where('admin_id', '=', adminId)
    .executeTakeFirst()
}

/** Stores a new pending secret, replacing any earlier pending one; the active secret is untouched. */
export async function savePending(db: Db, adminId: number, sealed: string, now: number): Promise<void> {
  await db
    .insertInto('admin_mfa')
    .values({ admin_id: adminId, pending_secret: sealed, pending_created_at: now, updated_at: now })
    .onConflict((oc) =>
      oc.column('admin_id').doUpdateSet({ pending_secret: sealed, pending_created_at: now, updated_at: now }),
    )
    .execute()
}

/**
 * Makes the pending secret active with `step` as its last accepted step. False when the pending secret
 * changed since it was read (a concurrent setup or verify won).
 */
export async function promotePending(
  db: Db,
  adminId: number,
  sealed: string,
  step: number,
  now: number,
): Promise<boolean> {
  const r = await db
    .updateTable('admin_mfa')
    .set({
      active_secret: sealed,
      active_last_step: step,
      pending_secret: null,
      pending_created_at: null,
      updated_at: now,
    })
    .where('admin_id', '=', adminId)
    .where('pending_secret', '=', sealed)
    .executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}

/**
 * Records `step` as used for the active secret, only if it is later than every step used before:
 * the single conditional write is what refuses a replayed code, even from two requests at once.
 */
export async function acceptActiveStep(
  db: Db,
  adminId: number,
  sealed: string,
  step: number,
  now: number,
): Promise<boolean> {
  const r = await db
    .updateTable('admin_mfa')
    .set({ active_last_step: step, updated_at: now })
    .where('admin_id', '=', adminId)
    .where('active_secret', '=', sealed)
    .where((eb) => eb.or([eb('active_last_step', 'is', null), eb('active_last_step', '<', step)]))
    .executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}

export async function markTwoFactorEnabled(db: Db, adminId: number, now: number): Promise<void> {
  await db
    .updateTable('administrators')
    .set({ is_two_factor_authentication_enabled: 1, updated_at: now })
    .where('id', '=', adminId)
    .execute()
}
