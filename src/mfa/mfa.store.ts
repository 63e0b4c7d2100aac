import type { Db } from '../platform/db/database.js'

export interface MfaAdmin {
  id: number
  email: string
  /** Sealed active secret, null while MFA is off */
  mfa_secret: string | null
  mfa_last_step: number | null
  /** Sealed secret from the latest setup, waiting for a code */
  mfa_pending_secret: string | null
}

export async function findMfaAdmin(db: Db, id: number): Promise<MfaAdmin | undefined> {
  return db
    .selectFrom('administrators')
    .select(['id', 'email', 'mfa_secret', 'mfa_last_step', 'mfa_pending_secret'])
    .where('id', '=', id)
    .where('disabled', '=', 0)
    .executeTakeFirst()
}

/** Stores a new pending secret, replacing any earlier pending one; the active secret is untouched. */
export async function savePending(db: Db, adminId: number, sealed: string, now: number): Promise<void> {
  await db
    .updateTable('administrators')
    .set({ mfa_pending_secret: sealed, mfa_pending_at: now })
    .where('id', '=', adminId)
    .execute()
}

/**
 * Makes the pending secret active (as `active`, the same secret sealed afresh) with `step` as its last
 * accepted step, and switches MFA on. False when the pending secret changed since it was read (a
 * concurrent setup or verify won).
 */
export async function promotePending(
  db: Db,
  adminId: number,
  pending: string,
  active: string,
  step: number,
  now: number,
): Promise<boolean> {
  const r = await db
    .updateTable('administrators')
    .set({
      mfa_secret: active,
      mfa_last_step: step,
      mfa_pending_secret: null,
      mfa_pending_at: null,
      is_two_factor_authentication_enabled: 1,
      updated_at: now,
    })
    .where('id', '=', adminId)
    .where('mfa_pending_secret', '=', pending)
    .executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}

/**
 * Records `step` as used for the active secret, only if it is later than every step used before:
 * the single conditional write is what refuses a replayed code, even from two requests at once.
 * `resealed`, when given, replaces the stored secret (sealed again under the current key).
 */
export async function acceptActiveStep(
  db: Db,
  adminId: number,
  sealed: string,
  step: number,
  resealed?: string,
): Promise<boolean> {
  const r = await db
    .updateTable('administrators')
    .set({ mfa_last_step: step, ...(resealed ? { mfa_secret: resealed } : {}) })
    .where('id', '=', adminId)
    .where('mfa_secret', '=', sealed)
    .where((eb) => eb.or([eb('mfa_last_step', 'is', null), eb('mfa_last_step', '<', step)]))
    .executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}
