import type { Insertable, Selectable } from 'kysely'
import { customerGeneration, nextCustomerGeneration } from '../consumers/consumers.store.js'
import { type Db, upsertById } from '../platform/db/database.js'
import type { AdministratorsTable, NetworkManagersTable, UsersTable } from '../platform/db/schema.js'
import { UnauthorizedError } from '../platform/errors.js'
import {
  adminGrant,
  consumerGrant,
  type Grant,
  networkManagerGrant,
  operatorGrant,
  type Role,
} from './grants.js'

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
      .select(['id', 'password_hash', 'role', 'event_ids', 'token_generation'])
      .where('email', '=', normalized)
      .where('disabled', '=', 0)
      .executeTakeFirst()
    return r ? { id: r.id, password_hash: r.password_hash, grant: adminGrant(r) } : null
  }
  if (role === 'operator') {
    const r = await db
      .selectFrom('users')
      .select(['id', 'password_hash', 'event_id', 'permissions', 'token_generation'])
      .where('email', '=', normalized)
      .executeTakeFirst()
    return r ? { id: r.id, password_hash: r.password_hash, grant: operatorGrant(r) } : null
  }
  const r = await db
    .selectFrom('network_managers')
    .select(['id', 'password_hash', 'event_ids', 'token_generation'])
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
        .select(['id', 'role', 'event_ids', 'token_generation'])
        .where('id', '=', id)
        .where('disabled', '=', 0)
        .executeTakeFirst()
      return r ? adminGrant(r) : null
    }
    case 'operator': {
      const r = await db
        .selectFrom('users')
        .select(['id', 'event_id', 'permissions', 'token_generation'])
        .where('id', '=', id)
        .executeTakeFirst()
      return r ? operatorGrant(r) : null
    }
    case 'network_manager': {
      const r = await db
        .selectFrom('network_managers')
        .select(['id', 'event_ids', 'token_generation'])
        .where('id', '=', id)
        .executeTakeFirst()
      return r ? networkManagerGrant(r) : null
    }
    case 'consumer': {
      const generation = await customerGeneration(db, id)
      return generation === undefined ? null : consumerGrant({ id, token_generation: generation })
    }
    default:
      return null
  }
}

/**
 * Starts the next token generation of an account that tokens are minted for, in the caller's
 * transaction: every token minted under the one that ends is refused from then on (the token
 * authority's `endSessions` writes its revocation). Answers the generation that ended, or undefined
 * when there is no such account.
 */
export async function nextAccountGeneration(db: Db, role: Role, id: number): Promise<number | undefined> {
  if (role === 'consumer') return nextCustomerGeneration(db, id)
  if (role === 'event_client') return undefined
  const r = await db
    .updateTable(tableOf[role])
    .set((eb) => ({ token_generation: eb('token_generation', '+', 1) }))
    .where('id', '=', id)
    .returning('token_generation')
    .executeTakeFirst()
  return r && r.token_generation - 1
}

/**
 * The grant of a token's subject as stored now, for every route that creates a credential outliving
 * the access token (API keys, dashboard users, device and offline tokens): a disabled or removed
 * account is 401 and a narrowed grant applies at once, not only when the access token lapses.
 */
export async function storedGrant(db: Db, claims: { role: Role; sub: string }): Promise<Grant> {
  const grant = await loadGrant(db, claims.role, Number(claims.sub))
  if (!grant) throw new UnauthorizedError()
  return grant
}

// Administrators: MFA secrets, reset of a forgotten password, the signed-in profile.

/** `mfa_secret` (sealed) is null while MFA is off; `mfa_pending_secret` waits for a code after a setup. */
export type MfaAdmin = Pick<
  Selectable<AdministratorsTable>,
  'id' | 'email' | 'mfa_secret' | 'mfa_last_step' | 'mfa_pending_secret'
>

export async function findMfaAdmin(db: Db, id: number): Promise<MfaAdmin | undefined> {
  return db
    .selectFrom('administrators')
    .select(['id', 'email', 'mfa_secret', 'mfa_last_step', 'mfa_pending_secret'])
    .where('id', '=', id)
    .where('disabled', '=', 0)
    .executeTakeFirst()
}

/** Whether an (enabled) administrator's MFA is on: an enrolled secret, not only a pending one. */
export async function adminMfaEnabled(db: Db, id: number): Promise<boolean> {
  const r = await db
    .selectFrom('administrators')
    .select('id')
    .where('id', '=', id)
    .where('mfa_secret', 'is not', null)
    .executeTakeFirst()
  return r !== undefined
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

/** An enabled administrator by e-mail (as stored: lower-case), for a password-reset request. */
export async function findAdminByEmail(db: Db, email: string) {
  return db
    .selectFrom('administrators')
    .select(['id', 'email'])
    .where('email', '=', email)
    .where('disabled', '=', 0)
    .executeTakeFirst()
}

/** Sets a new password after a reset. */
export async function setAdminPassword(db: Db, adminId: number, hash: string, now: number): Promise<void> {
  await db
    .updateTable('administrators')
    .set({ password_hash: hash, updated_at: now })
    .where('id', '=', adminId)
    .execute()
}

/** The profile of an enabled administrator, for GET /admin/me. */
export async function findAdminProfile(db: Db, id: number) {
  return db
    .selectFrom('administrators')
    .select(['id', 'email', 'role', 'event_ids', 'is_two_factor_authentication_enabled', 'created_at'])
    .where('id', '=', id)
    .where('disabled', '=', 0)
    .executeTakeFirst()
}

// Break-glass commands (`wristband admin ...`): any administrator, disabled ones included.

export type AdminSummary = Pick<Selectable<AdministratorsTable>, 'id' | 'email' | 'role' | 'disabled'>

/** An administrator by (lower-case) e-mail or by id, disabled or not. */
export async function findAdministrator(
  db: Db,
  by: { email: string } | { id: number },
): Promise<AdminSummary | undefined> {
  const q = db.selectFrom('administrators').select(['id', 'email', 'role', 'disabled'])
  return ('email' in by ? q.where('email', '=', by.email) : q.where('id', '=', by.id)).executeTakeFirst()
}

/** Inserts an administrator; a taken e-mail fails with the database's unique violation. */
export async function insertAdministrator(db: Db, values: Insertable<AdministratorsTable>): Promise<number> {
  const r = await db.insertInto('administrators').values(values).returning('id').executeTakeFirstOrThrow()
  return r.id
}

export async function setAdminDisabled(db: Db, adminId: number, disabled: 0 | 1, now: number): Promise<void> {
  await db
    .updateTable('administrators')
    .set({ disabled, updated_at: now })
    .where('id', '=', adminId)
    .execute()
}

/**
 * The MFA columns a reset clears. Named here rather than found by introspecting the database: on
 * PostgreSQL introspection reads every schema, and fails when another deployment sharing the
 * database drops its schema meanwhile.
 */
export const MFA_COLUMNS = ['mfa_secret', 'mfa_last_step', 'mfa_pending_secret', 'mfa_pending_at'] as const

/** Switches MFA off and forgets the enrolled and pending secrets, so the administrator enrols again. */
export async function clearAdminMfa(db: Db, adminId: number, now: number): Promise<void> {
  await db
    .updateTable('administrators')
    .set({
      is_two_factor_authentication_enabled: 0,
      updated_at: now,
      ...Object.fromEntries(MFA_COLUMNS.map((c) => [c, null])),
    })
    .where('id', '=', adminId)
    .execute()
}

// Dashboard sign-in: administrators and network managers by e-mail (lower-case), reloaded by id on each request.

/** With `mfa_enabled`: such an administrator gives a TOTP code after the password. */
export async function findAdminSignIn(db: Db, email: string) {
  const r = await db
    .selectFrom('administrators')
    .select(['id', 'email', 'password_hash', 'role', 'event_ids', 'mfa_secret', 'token_generation'])
    .where('email', '=', email)
    .where('disabled', '=', 0)
    .executeTakeFirst()
  if (!r) return undefined
  const { mfa_secret, ...admin } = r
  return { ...admin, mfa_enabled: mfa_secret !== null }
}

export async function findNetworkManagerSignIn(db: Db, email: string) {
  return db
    .selectFrom('network_managers')
    .select(['id', 'email', 'password_hash', 'event_ids', 'token_generation'])
    .where('email', '=', email)
    .executeTakeFirst()
}

/** The password hash of an administrator or network manager by id (null: no such account). */
export async function staffPasswordHash(
  db: Db,
  kind: 'admin' | 'network_manager',
  id: number,
): Promise<string | null> {
  const r = await db.selectFrom(tableOf[kind]).select('password_hash').where('id', '=', id).executeTakeFirst()
  return r?.password_hash ?? null
}

/** An enabled administrator by id; undefined once removed or disabled. */
export async function findAdminById(db: Db, id: number) {
  return db
    .selectFrom('administrators')
    .select(['id', 'email', 'role', 'event_ids', 'token_generation'])
    .where('id', '=', id)
    .where('disabled', '=', 0)
    .executeTakeFirst()
}

export async function findNetworkManagerById(db: Db, id: number) {
  return db
    .selectFrom('network_managers')
    .select(['id', 'email', 'event_ids', 'token_generation'])
    .where('id', '=', id)
    .executeTakeFirst()
}

// Seed files: create or update a staff account matched by its (lower-case) e-mail; returns its id.

export async function upsertAdministrator(
  db: Db,
  email: string,
  values: Pick<AdministratorsTable, 'password_hash' | 'role' | 'event_ids'> & { updated_at: number },
  now: number,
): Promise<number> {
  return upsertById(
    await db.selectFrom('administrators').select('id').where('email', '=', email).executeTakeFirst(),
    () =>
      db
        .insertInto('administrators')
        .values({ email, ...values, created_at: now })
        .returning('id')
        .executeTakeFirstOrThrow(),
    (id) => db.updateTable('administrators').set(values).where('id', '=', id).execute(),
  )
}

export async function upsertNetworkManager(
  db: Db,
  email: string,
  values: Pick<NetworkManagersTable, 'password_hash' | 'event_ids'>,
  now: number,
): Promise<number> {
  return upsertById(
    await db.selectFrom('network_managers').select('id').where('email', '=', email).executeTakeFirst(),
    () =>
      db
        .insertInto('network_managers')
        .values({ email, ...values, created_at: now })
        .returning('id')
        .executeTakeFirstOrThrow(),
    (id) => db.updateTable('network_managers').set(values).where('id', '=', id).execute(),
  )
}

/** Operators are the `users` table. */
export async function upsertOperator(
  db: Db,
  email: string,
  values: Pick<UsersTable, 'password_hash' | 'event_id' | 'mode' | 'permissions'>,
  now: number,
): Promise<number> {
  return upsertById(
    await db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirst(),
    () =>
      db
        .insertInto('users')
        .values({ email, ...values, created_at: now })
        .returning('id')
        .executeTakeFirstOrThrow(),
    (id) => db.updateTable('users').set(values).where('id', '=', id).execute(),
  )
}

/** The operator with this id when it belongs to `eventId`. */
export async function findOperatorAtEvent(db: Db, id: number, eventId: number) {
  return db
    .selectFrom('users')
    .select(['id', 'event_id', 'token_generation'])
    .where('id', '=', id)
    .where('event_id', '=', eventId)
    .executeTakeFirst()
}

/**
 * An operator by e-mail (compared trimmed and in lower case, as stored): its sign-in record for the
 * device login's operator step; the seed file names a device's operator by it too.
 */
export async function findOperatorByEmail(db: Db, email: string) {
  return db
    .selectFrom('users')
    .select(['id', 'email', 'password_hash', 'event_id', 'mode', 'permissions'])
    .where('email', '=', email.trim().toLowerCase())
    .executeTakeFirst()
}
