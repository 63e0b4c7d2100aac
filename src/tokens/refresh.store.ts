import type { Db } from '../platform/db/database.js'

export interface RefreshRow {
  jti: string
  family_id: string
  subject_kind: string
  subject_id: number
  expires_at: number
  rotated_at: number | null
  revoked_at: number | null
  mfa_verified_at: number | null
}

export async function insertRefresh(
  db: Db,
  row: {
    jti: string
    family_id: string
    subject_kind: string
    subject_id: number
    expires_at: number
    created_at: number
    mfa_verified_at?: number | null
  },
): Promise<void> {
  await db.insertInto('refresh_tokens').values(row).execute()
}

export async function findRefresh(db: Db, jti: string): Promise<RefreshRow | undefined> {
  return db
    .selectFrom('refresh_tokens')
    .select([
      'jti',
      'family_id',
      'subject_kind',
      'subject_id',
      'expires_at',
      'rotated_at',
      'revoked_at',
      'mfa_verified_at',
    ])
    .where('jti', '=', jti)
    .executeTakeFirst()
}

/** Marks a live token rotated; false when another request rotated or revoked it first. */
export async function markRotated(db: Db, jti: string, now: number): Promise<boolean> {
  const r = await db
    .updateTable('refresh_tokens')
    .set({ rotated_at: now })
    .where('jti', '=', jti)
    .where('rotated_at', 'is', null)
    .where('revoked_at', 'is', null)
    .executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}

/** Revokes every not-yet-revoked token of a family; returns them for the blocklist. */
export async function revokeFamily(db: Db, familyId: string, now: number) {
  return db
    .updateTable('refresh_tokens')
    .set({ revoked_at: now })
    .where('family_id', '=', familyId)
    .where('revoked_at', 'is', null)
    .returning(['jti', 'expires_at'])
    .execute()
}

/** Revokes every live refresh token of a subject (password reset, disable). */
export async function revokeSubject(db: Db, kind: string, id: number, now: number) {
  return db
    .updateTable('refresh_tokens')
    .set({ revoked_at: now })
    .where('subject_kind', '=', kind)
    .where('subject_id', '=', id)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .returning(['jti', 'expires_at'])
    .execute()
}
