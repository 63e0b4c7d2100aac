import type { Selectable, Updateable } from 'kysely'
import { type Db, upsertById } from '../platform/db/database.js'
import type { CustomersTable } from '../platform/db/schema.js'
import { sha256Hex } from '../platform/digest.js'

const columns = ['id', 'phone', 'email', 'first_name', 'last_name', 'created_at', 'password_hash'] as const

type Row = Pick<Selectable<CustomersTable>, (typeof columns)[number]>
/** A consumer as the routes show it: whether a password is set, never its hash. */
export type CustomerRecord = Omit<Row, 'password_hash'> & { has_password: boolean }
const toRecord = ({ password_hash, ...r }: Row): CustomerRecord => ({ ...r, has_password: !!password_hash })

export async function findCustomerCredentials(
  db: Db,
  phone: string,
): Promise<{ id: number; password_hash: string | null; token_generation: number } | undefined> {
  return db
    .selectFrom('customers')
    .select(['id', 'password_hash', 'token_generation'])
    .where('phone', '=', phone)
    .executeTakeFirst()
}

export async function getCustomer(db: Db, id: number): Promise<CustomerRecord | null> {
  const r = await db.selectFrom('customers').select(columns).where('id', '=', id).executeTakeFirst()
  return r ? toRecord(r) : null
}

export async function insertCustomer(
  db: Db,
  values: {
    phone: string | null
    password_hash: string | null
    email: string | null
    email_self_asserted: number
    first_name: string | null
    last_name: string | null
    created_at: number
  },
): Promise<number> {
  const r = await db.insertInto('customers').values(values).returning('id').executeTakeFirstOrThrow()
  return r.id
}

export async function updateCustomer(
  db: Db,
  id: number,
  values: Partial<{
    email: string | null
    email_self_asserted: number
    first_name: string | null
    last_name: string | null
    password_hash: string
  }>,
): Promise<void> {
  if (Object.keys(values).length === 0) return
  await db.updateTable('customers').set(values).where('id', '=', id).execute()
}

/** The token generation of the consumer with this id, or undefined when there is none. */
export async function customerGeneration(db: Db, id: number): Promise<number | undefined> {
  const r = await db
    .selectFrom('customers')
    .select('token_generation')
    .where('id', '=', id)
    .executeTakeFirst()
  return r?.token_generation
}

/** Starts the consumer's next token generation; answers the one that ended (undefined: no such consumer). */
export async function nextCustomerGeneration(db: Db, id: number): Promise<number | undefined> {
  const r = await db
    .updateTable('customers')
    .set((eb) => ({ token_generation: eb('token_generation', '+', 1) }))
    .where('id', '=', id)
    .returning('token_generation')
    .executeTakeFirst()
  return r && r.token_generation - 1
}

/** The consumers whose e-mail address is this one and proven (not self-asserted), oldest first. */
export async function customersWithProvenEmail(db: Db, email: string): Promise<number[]> {
  const rows = await db
    .selectFrom('customers')
    .select('id')
    .where('email', '=', email)
    .where('email_self_asserted', '=', 0)
    .orderBy('id')
    .execute()
  return rows.map((r) => r.id)
}

/** Stores a proof of phone ownership; only its hash is kept. */
export async function insertPhoneVerification(
  db: Db,
  row: { token: string; phone: string; expires_at: number; created_at: number },
): Promise<void> {
  await db
    .insertInto('phone_verifications')
    .values({
      token_hash: sha256Hex(row.token),
      phone: row.phone,
      expires_at: row.expires_at,
      created_at: row.created_at,
    })
    .execute()
}

/** Uses up a live proof for this phone; false when unknown, for another phone, expired or used. */
export async function usePhoneVerification(
  db: Db,
  token: string,
  phone: string,
  now: number,
): Promise<boolean> {
  const r = await db
    .updateTable('phone_verifications')
    .set({ used_at: now })
    .where('token_hash', '=', sha256Hex(token))
    .where('phone', '=', phone)
    .where('used_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}

/** Seed files: updates the consumer with this phone, or creates it; returns its id. */
export async function upsertCustomerByPhone(
  db: Db,
  phone: string,
  values: Pick<Updateable<CustomersTable>, 'password_hash' | 'email' | 'first_name' | 'last_name'>,
  now: number,
): Promise<number> {
  return upsertById(
    await db.selectFrom('customers').select('id').where('phone', '=', phone).executeTakeFirst(),
    () =>
      db
        .insertInto('customers')
        .values({ phone, ...values, created_at: now })
        .returning('id')
        .executeTakeFirstOrThrow(),
    (id) => db.updateTable('customers').set(values).where('id', '=', id).execute(),
  )
}
