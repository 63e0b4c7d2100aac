import type { Insertable, Selectable } from 'kysely'
import type { Db } from '../platform/db/database.js'
import { deleteDueBatch, type PruneCursor, type Pruned } from '../platform/db/prune.js'
import type { RefreshTokensTable } from '../platform/db/schema.js'

export type RefreshRow = Omit<Selectable<RefreshTokensTable>, 'created_at'>

export async function insertRefresh(
  db: Db,
  row: Omit<Insertable<RefreshTokensTable>, 'rotated_at' | 'revoked_at'>,
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

/** Revokes every not-yet-revoked token of a family. */
export async function revokeFamily(db: Db, familyId: string, now: number): Promise<void> {
  await db
    .updateTable('refresh_tokens')
    .set({ revoked_at: now })
    .where('family_id', '=', familyId)
    .where('revoked_at', 'is', null)
    .execute()
}

/** Revokes every live refresh token of a subject (password reset, disable); returns how many. */
export async function revokeSubject(db: Db, kind: string, id: number, now: number): Promise<number> {
  const r = await db
    .updateTable('refresh_tokens')
    .set({ revoked_at: now })
    .where('subject_kind', '=', kind)
    .where('subject_id', '=', id)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst()
  return Number(r.numUpdatedRows)
}

/**
 * Deletes up to `limit` refresh tokens that expired before `before` (retention), in (expires_at, jti)
 * order past `after`, over the index refresh_tokens_expires_jti.
 */
export function pruneExpiredRefresh(
  db: Db,
  before: number,
  limit: number,
  after?: PruneCursor,
): Promise<Pruned> {
  return deleteDueBatch(
    db,
    { table: 'refresh_tokens', time: 'expires_at', key: 'jti', keyType: 'text' },
    before,
    limit,
    after,
  )
}
