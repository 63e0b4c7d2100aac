import type { Db } from '../platform/db/database.js'

export interface DashboardUserRecord {
  id: number
  username: string
  event_ids: string
  created_at: number
}

const COLUMNS = ['id', 'username', 'event_ids', 'created_at'] as const

export function listDashboardUsers(db: Db): Promise<DashboardUserRecord[]> {
  return db.selectFrom('dashboard_users').select(COLUMNS).orderBy('username').execute()
}

export async function findDashboardUser(db: Db, id: number): Promise<DashboardUserRecord | null> {
  return (
    (await db.selectFrom('dashboard_users').select(COLUMNS).where('id', '=', id).executeTakeFirst()) ?? null
  )
}

/** Inserts a user; a taken username surfaces as the driver's unique violation. */
export function insertDashboardUser(
  db: Db,
  values: { username: string; password_hash: string; event_ids: string; created_at: number },
): Promise<DashboardUserRecord> {
  return db.insertInto('dashboard_users').values(values).returning(COLUMNS).executeTakeFirstOrThrow()
}

export async function updateDashboardUser(
  db: Db,
  id: number,
  values: { password_hash?: string; event_ids?: string },
): Promise<void> {
  await db.updateTable('dashboard_users').set(values).where('id', '=', id).execute()
}

export async function deleteDashboardUser(db: Db, id: number): Promise<void> {
  await db.deleteFrom('dashboard_users').where('id', '=', id).execute()
}

/** The ids among `ids` that name no event. */
export async function missingEvents(db: Db, ids: number[]): Promise<number[]> {
  if (ids.length === 0) return []
  const found = await db.selectFrom('events').select('id').where('id', 'in', ids).execute()
  const have = new Set(found.map((r) => r.id))
  return ids.filter((id) => !have.has(id))
}
