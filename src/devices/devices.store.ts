import { type ExpressionBuilder, type Selectable, sql, type Updateable } from 'kysely'
import { type Db, upsertById } from '../platform/db/database.js'
import type { DevicesTable } from '../platform/db/schema.js'

const columns = ['id', 'dev_mac', 'event_id', 'operator_id', 'archived', 'token_generation'] as const

/**
 * A MAC is written in either case (`aa:bb:…` by one tool, `AA:BB:…` by another): devices are found by
 * it case-insensitively, through the index on lower(dev_mac). Stored values are kept as written.
 */
function macIs(devMac: string) {
  return (eb: ExpressionBuilder<{ devices: DevicesTable }, 'devices'>) =>
    eb(sql`lower(devices.dev_mac)`, '=', devMac.toLowerCase())
}

export type DeviceRecord = Pick<Selectable<DevicesTable>, (typeof columns)[number]>

/** The device with this hardware address at this event, unless archived. */
export async function findActiveDevice(db: Db, devMac: string, eventId: number) {
  return db
    .selectFrom('devices')
    .innerJoin('events', 'events.id', 'devices.event_id')
    .select([
      'devices.id',
      'devices.dev_mac',
      'devices.event_id',
      'devices.operator_id',
      'devices.key_hash',
      'devices.token_generation',
      'events.uid as event_uid',
      'events.name as event_name',
      'events.timezone as event_timezone',
    ])
    .where(macIs(devMac))
    .where('devices.event_id', '=', eventId)
    .where('devices.archived', '=', 0)
    .executeTakeFirst()
}

export async function getDevice(db: Db, id: number): Promise<DeviceRecord | undefined> {
  return db.selectFrom('devices').select(columns).where('id', '=', id).executeTakeFirst()
}

/** Whether a device has a key (its SHA-256 stored); false also for no such device. */
export async function deviceHasKey(db: Db, id: number): Promise<boolean> {
  const row = await db.selectFrom('devices').select('key_hash').where('id', '=', id).executeTakeFirst()
  return row !== undefined && row.key_hash !== null
}

/** Sets (or with null removes) the SHA-256 of a device's key; false when there is no such device. */
export async function setDeviceKeyHash(db: Db, id: number, keyHash: string | null): Promise<boolean> {
  const r = await db.updateTable('devices').set({ key_hash: keyHash }).where('id', '=', id).executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}

export async function findDeviceByMac(db: Db, devMac: string): Promise<DeviceRecord | undefined> {
  return db.selectFrom('devices').select(columns).where(macIs(devMac)).executeTakeFirst()
}

export async function insertDevice(
  db: Db,
  row: {
    dev_mac: string
    event_id: number
    operator_id: number | null
    key_hash: string
    created_at: number
  },
): Promise<number> {
  const r = await db
    .insertInto('devices')
    .values({ ...row, archived: 0 })
    .returning('id')
    .executeTakeFirstOrThrow()
  return r.id
}

/** Every device (of one event when given), without key hashes: only whether a key is set. */
export async function listDevices(db: Db, eventId?: number) {
  let q = db
    .selectFrom('devices')
    .select(['id', 'dev_mac', 'event_id', 'operator_id', 'archived', 'created_at', 'key_hash'])
    .orderBy('id')
  if (eventId !== undefined) q = q.where('event_id', '=', eventId)
  const rows = await q.execute()
  return rows.map(({ key_hash, ...d }) => ({ ...d, archived: d.archived === 1, has_key: key_hash !== null }))
}

/**
 * Starts the next generation of a device's offline tokens; returns the generation that ended (undefined
 * when there is no such device). The caller revokes that one in the same transaction.
 */
export async function nextTokenGeneration(db: Db, id: number): Promise<number | undefined> {
  const r = await db
    .updateTable('devices')
    .set((eb) => ({ token_generation: eb('token_generation', '+', 1) }))
    .where('id', '=', id)
    .returning('token_generation')
    .executeTakeFirst()
  return r && r.token_generation - 1
}

/** Archives a device (it can no longer sign in); false when it was archived already or does not exist. */
export async function archiveDevice(db: Db, id: number): Promise<boolean> {
  const r = await db
    .updateTable('devices')
    .set({ archived: 1 })
    .where('id', '=', id)
    .where('archived', '=', 0)
    .executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}

export async function setDeviceOperator(db: Db, id: number, operatorId: number): Promise<void> {
  await db.updateTable('devices').set({ operator_id: operatorId }).where('id', '=', id).execute()
}

export async function findSession(db: Db, userId: number) {
  return db
    .selectFrom('operator_sessions')
    .select(['token_hash', 'token_sealed'])
    .where('user_id', '=', userId)
    .executeTakeFirst()
}

/** Stores a session unless the operator already has one (a concurrent call won); true when stored. */
export async function insertSession(
  db: Db,
  row: { user_id: number; token_hash: string; token_sealed: string; created_at: number },
): Promise<boolean> {
  const r = await db
    .insertInto('operator_sessions')
    .values(row)
    .onConflict((oc) => oc.column('user_id').doNothing())
    .executeTakeFirst()
  return Number(r.numInsertedOrUpdatedRows ?? 0) === 1
}

export async function deleteSession(db: Db, userId: number, tokenHash?: string): Promise<void> {
  let q = db.deleteFrom('operator_sessions').where('user_id', '=', userId)
  if (tokenHash) q = q.where('token_hash', '=', tokenHash)
  await q.execute()
}

/** The operator holding the session token with this hash. */
export async function findSessionOperator(db: Db, tokenHash: string) {
  return db
    .selectFrom('operator_sessions')
    .innerJoin('users', 'users.id', 'operator_sessions.user_id')
    .select([
      'users.id',
      'users.event_id',
      'users.permissions',
      'users.mode',
      'users.token_generation',
      'operator_sessions.created_at',
    ])
    .where('operator_sessions.token_hash', '=', tokenHash)
    .executeTakeFirst()
}

/**
 * Seed files: updates the device with this hardware address, or creates it; returns its id and, for an
 * existing device, whether it was archived and its key hash before.
 */
export async function upsertDevice(
  db: Db,
  devMac: string,
  values: Pick<Updateable<DevicesTable>, 'event_id' | 'operator_id' | 'archived' | 'key_hash'> & {
    event_id: number
    archived: number
  },
  now: number,
): Promise<{ id: number; before?: { archived: number; key_hash: string | null } }> {
  const found = await db
    .selectFrom('devices')
    .select(['id', 'archived', 'key_hash'])
    .where(macIs(devMac))
    .executeTakeFirst()
  const id = await upsertById(
    found,
    () =>
      db
        .insertInto('devices')
        .values({ dev_mac: devMac, ...values, created_at: now })
        .returning('id')
        .executeTakeFirstOrThrow(),
    (id) => db.updateTable('devices').set(values).where('id', '=', id).execute(),
  )
  return found ? { id, before: { archived: found.archived, key_hash: found.key_hash } } : { id }
}
