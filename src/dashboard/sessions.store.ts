import type { Db } from '../platform/db/database.js'
import type { DashboardSessionsTable } from '../platform/db/schema.js'

export type SessionRow = DashboardSessionsTable

export async function insertSession(db: Db, row: SessionRow): Promise<void> {
  await db.insertInto('dashboard_sessions').values(row).execute()
}

export async function findSession(db: Db, tokenHash: string, now: number): Promise<SessionRow | null> {
  const row = await db
    .selectFrom('dashboard_sessions')
    .selectAll()
    .where('token_hash', '=', tokenHash)
    .where('expires_at', '>', now)
    .executeTakeFirst()
  return row ?? null
}

export async function touchSession(db: Db, tokenHash: string, now: number, expiresAt: number): Promise<void> {
  await db
    .updateTable('dashboard_sessions')
    .set({ last_seen_at: now, expires_at: expiresAt })
    .where('token_hash', '=', tokenHash)
    .execute()
}

export async function deleteSession(db: Db, tokenHash: string): Promise<void> {
  await db.deleteFrom('dashboard_sessions').where('token_hash', '=', tokenHash).execute()
}

export async function purgeExpiredSessions(db: Db, now: number): Promise<void> {
  await db.deleteFrom('dashboard_sessions').where('expires_at', '<=', now).execute()
}

/**
 * Ends every session of an account (password changed, account removed); returns how many. The token
 * authority's `endSessions` calls it (it is one of its `sessionStores`).
 */
export async function deleteSessionsOf(db: Db, kind: string, id: number): Promise<number> {
  const r = await db
    .deleteFrom('dashboard_sessions')
    .where('subject_kind', '=', kind)
    .where('subject_id', '=', id)
    .executeTakeFirst()
  return Number(r.numDeletedRows)
}
