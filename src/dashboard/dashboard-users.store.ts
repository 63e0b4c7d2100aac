import type { Insertable, Selectable, Updateable } from 'kysely'
import { type Db, upsertById } from '../platform/db/database.js'
import type { DashboardUsersTable } from '../platform/db/schema.js'

export type DashboardUserRecord = Pick<
  Selectable<DashboardUsersTable>,
  'id' | 'username' | 'event_ids' | 'partner' | 'created_at'
>

const COLUMNS = ['id', 'username', 'event_ids', 'partner', 'created_at'] as const

export function listDashboardUsers(db: Db): Promise<DashboardUserRecord[]> {
  return db.selectFrom('dashboard_users').select(COLUMNS).orderBy('username').execute()
}

export async function findDashboardUser(db: Db, id: number): Promise<DashboardUserRecord | null> {
  return (
    (await db.selectFrom('dashboard_users').select(COLUMNS).where('id', '=', id).executeTakeFirst()) ?? null
  )
}

/** A dashboard user's password hash (null: no such user). */
export async function dashboardUserPasswordHash(db: Db, id: number): Promise<string | null> {
  const r = await db
    .selectFrom('dashboard_users')
    .select('password_hash')
    .where('id', '=', id)
    .executeTakeFirst()
  return r?.password_hash ?? null
}

/** Inserts a user; a taken username surfaces as the driver's unique violation. */
export function insertDashboardUser(
  db: Db,
  values: Insertable<DashboardUsersTable>,
): Promise<DashboardUserRecord> {
  return db.insertInto('dashboard_users').values(values).returning(COLUMNS).executeTakeFirstOrThrow()
}

export async function updateDashboardUser(
  db: Db,
  id: number,
  values: Pick<Updateable<DashboardUsersTable>, 'password_hash' | 'event_ids' | 'partner'>,
): Promise<void> {
  await db.updateTable('dashboard_users').set(values).where('id', '=', id).execute()
}

/** A dashboard user by username, with the password hash, for sign-in. */
export async function findDashboardUserSignIn(db: Db, username: string) {
  return db
    .selectFrom('dashboard_users')
    .select(['id', 'username', 'password_hash', 'event_ids', 'partner'])
    .where('username', '=', username)
    .executeTakeFirst()
}

export async function deleteDashboardUser(db: Db, id: number): Promise<void> {
  await db.deleteFrom('dashboard_users').where('id', '=', id).execute()
}

/**
 * Seed files: updates the dashboard user with this username, or creates it; returns its id. A partner
 * left out keeps the stored one (null unbinds).
 */
export async function upsertDashboardUser(
  db: Db,
  username: string,
  values: { password_hash: string; event_ids: string; partner?: string | null },
  now: number,
): Promise<number> {
  return upsertById(
    await db.selectFrom('dashboard_users').select('id').where('username', '=', username).executeTakeFirst(),
    () => insertDashboardUser(db, { username, ...values, created_at: now }),
    (id) => updateDashboardUser(db, id, values),
  )
}
