import type { Db } from '../platform/db/database.js'
import { UnauthorizedError } from '../platform/errors.js'
import {
  adminGrant,
  type Claims,
  consumerGrant,
  type Grant,
  networkManagerGrant,
  operatorGrant,
  type Role,
} from '../tokens/claims.js'

/** The roles that sign in with e-mail and password at /auth/login. */
export type StaffRole = 'admin' | 'operator' | 'network_manager'

export interface StaffCredentials {
  id: number
  password_hash: string
  grant: Grant
}

const tableOf = { admin: 'administrators', operator: 'users', network_manager: 'network_managers' } as const

export async function findStaffByEmail(
  db: Db,
  role: StaffRole,
  email: string,
): Promise<StaffCredentials | null> {
  const normalized = email.trim().toLowerCase()
  if (role === 'admin') {
    const r = await db
      .selectFrom('administrators')
      .select(['id', 'password_hash', 'role', 'event_ids'])
      .where('email', '=', normalized)
      .where('disabled', '=', 0)
      .executeTakeFirst()
    return r ? { id: r.id, password_hash: r.password_hash, grant: adminGrant(r) } : null
  }
  if (role === 'operator') {
    const r = await db
      .selectFrom('users')
      .select(['id', 'password_hash', 'event_id', 'permissions'])
      .where('email', '=', normalized)
      .executeTakeFirst()
    return r ? { id: r.id, password_hash: r.password_hash, grant: operatorGrant(r) } : null
  }
  const r = await db
    .selectFrom('network_managers')
    .select(['id', 'password_hash', 'event_ids'])
    .where('email', '=', normalized)
    .executeTakeFirst()
  return r ? { id: r.id, password_hash: r.password_hash, grant: networkManagerGrant(r) } : null
}

export async function updatePasswordHash(db: Db, role: StaffRole, id: number, hash: string): Promise<void> {
  await db.updateTable(tableOf[role]).set({ password_hash: hash }).where('id', '=', id).execute()
}

/** Rebuilds the claims of a subject from its stored record; null when it no longer exists or is disabled. */
export async function loadGrant(db: Db, role: Role, id: number): Promise<Grant | null> {
  switch (role) {
    case 'admin': {
      const r = await db
        .selectFrom('administrators')
        .select(['id', 'role', 'event_ids'])
        .where('id', '=', id)
        .where('disabled', '=', 0)
        .executeTakeFirst()
      return r ? adminGrant(r) : null
    }
    case 'operator': {
      const r = await db
        .selectFrom('users')
        .select(['id', 'event_id', 'permissions'])
        .where('id', '=', id)
        .executeTakeFirst()
      return r ? operatorGrant(r) : null
    }
    case 'network_manager': {
      const r = await db
        .selectFrom('network_managers')
        .select(['id', 'event_ids'])
        .where('id', '=', id)
        .executeTakeFirst()
      return r ? networkManagerGrant(r) : null
    }
    case 'consumer': {
      const r = await db.selectFrom('customers').select(['id']).where('id', '=', id).executeTakeFirst()
      return r ? consumerGrant(r) : null
    }
    default:
      return null
  }
}

/**
 * The grant of a token's subject as stored now, for every route that creates a credential outliving
 * the access token (API keys, dashboard users, device and offline tokens): a disabled or removed
 * account is 401 and a narrowed grant applies at once, not only when the access token lapses.
 */
export async function storedGrant(db: Db, claims: Pick<Claims, 'role' | 'sub'>): Promise<Grant> {
  const grant = await loadGrant(db, claims.role, Number(claims.sub))
  if (!grant) throw new UnauthorizedError()
  return grant
}
