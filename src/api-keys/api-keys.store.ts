import type { Selectable } from 'kysely'
import type { Db } from '../platform/db/database.js'
import type { EventClientsTable } from '../platform/db/schema.js'
import { sha256Hex } from '../platform/digest.js'
import { randomToken } from '../platform/random.js'

export const API_KEY_PREFIX = 'wb_'

const columns = [
  'id',
  'event_id',
  'name',
  'scopes',
  'key_prefix',
  'created_at',
  'last_used_at',
  'revoked_at',
  'partner_id',
] as const
type Row = Pick<Selectable<EventClientsTable>, (typeof columns)[number]>
/** An API key as the routes show it: the stored row with its scopes parsed (never the key's hash). */
export type ApiKeyRecord = Omit<Row, 'scopes'> & { scopes: string[] }

const toRecord = (r: Row): ApiKeyRecord => ({ ...r, scopes: JSON.parse(r.scopes) as string[] })

/** The partner of an event with this name, created when missing; its id. */
export async function partnerNamed(db: Db, eventId: number, name: string, now: number): Promise<number> {
  await db
    .insertInto('partners')
    .values({ event_id: eventId, name, created_at: now })
    .onConflict((oc) => oc.columns(['event_id', 'name']).doNothing())
    .execute()
  const row = await db
    .selectFrom('partners')
    .select('id')
    .where('event_id', '=', eventId)
    .where('name', '=', name)
    .executeTakeFirstOrThrow()
  return row.id
}

/**
 * A key's partner when none was named: a partner of its own, named after the key's name and id. Nothing
 * of the key itself goes into the name, which dashboard users, listings and logs show (a name with the
 * key's first characters gave away part of the secret). Partners named by an earlier release keep their
 * names.
 */
const ownPartnerName = (name: string, keyId: number) => `${name} (key #${keyId})`

/**
 * Creates a key; the plaintext (`wb_` + 43 URL-safe characters) exists only in the return value. The
 * key belongs to the named partner of the event (created when missing, so a replacement key named for
 * the same partner carries its transfers, receiver and deliveries over), or to a partner of its own.
 */
export async function createApiKey(
  db: Db,
  input: {
    event_id: number
    name: string
    scopes: string[]
    created_by: string | null
    now: number
    partner?: string | undefined
  },
): Promise<{ record: ApiKeyRecord; plaintext: string; partner: string }> {
  const plaintext = `${API_KEY_PREFIX}${randomToken(32)}`
  const prefix = plaintext.slice(0, 10)
  const named =
    input.partner === undefined ? undefined : await partnerNamed(db, input.event_id, input.partner, input.now)
  const row = await db
    .insertInto('event_clients')
    .values({
      event_id: input.event_id,
      name: input.name,
      scopes: JSON.stringify(input.scopes),
      token_hash: sha256Hex(plaintext),
      key_prefix: prefix,
      created_by: input.created_by,
      created_at: input.now,
      partner_id: named ?? null,
    })
    .returning(columns)
    .executeTakeFirstOrThrow()
  if (input.partner !== undefined) return { record: toRecord(row), plaintext, partner: input.partner }
  // A partner of its own, named by the key's id (known once the key is written). A key left without one
  // (a failure in between) gets the same partner when it is first used (assignOwnPartner).
  const record = toRecord(row)
  const partnerId = await assignOwnPartner(db, record, input.now)
  return {
    record: { ...record, partner_id: partnerId },
    plaintext,
    partner: ownPartnerName(input.name, row.id),
  }
}

/**
 * The partner of a key written by a release before partners (its `partner_id` is null): a partner of
 * its own, as migration 015 gave every key it found.
 */
export async function assignOwnPartner(db: Db, key: ApiKeyRecord, now: number): Promise<number> {
  const partnerId = await partnerNamed(db, key.event_id, ownPartnerName(key.name, key.id), now)
  await db
    .updateTable('event_clients')
    .set({ partner_id: partnerId })
    .where('id', '=', key.id)
    .where('partner_id', 'is', null)
    .execute()
  return partnerId
}

/** The names of partners by id (for listings). */
export async function partnerNames(db: Db, ids: number[]): Promise<Map<number, string>> {
  if (ids.length === 0) return new Map()
  const rows = await db.selectFrom('partners').select(['id', 'name']).where('id', 'in', ids).execute()
  return new Map(rows.map((r) => [r.id, r.name]))
}

/** An event's partners, in the order they were created. */
export function listPartners(db: Db, eventId: number) {
  return db
    .selectFrom('partners')
    .select(['id', 'name'])
    .where('event_id', '=', eventId)
    .orderBy('id')
    .execute()
}

/** The live key with this plaintext, found by its hash (an indexed look-up, no scan). */
export async function findLiveApiKey(db: Db, plaintext: string): Promise<ApiKeyRecord | null> {
  const row = await db
    .selectFrom('event_clients')
    .select(columns)
    .where('token_hash', '=', sha256Hex(plaintext))
    .where('revoked_at', 'is', null)
    .executeTakeFirst()
  return row ? toRecord(row) : null
}

export async function getApiKey(db: Db, id: number): Promise<ApiKeyRecord | null> {
  const row = await db.selectFrom('event_clients').select(columns).where('id', '=', id).executeTakeFirst()
  return row ? toRecord(row) : null
}

export async function listApiKeys(db: Db, eventId: number): Promise<ApiKeyRecord[]> {
  const rows = await db
    .selectFrom('event_clients')
    .select(columns)
    .where('event_id', '=', eventId)
    .orderBy('id')
    .execute()
  return rows.map(toRecord)
}

/** Revokes by clearing the stored hash (docs/specification.md); false when already revoked. */
export async function revokeApiKey(db: Db, id: number, now: number): Promise<boolean> {
  const r = await db
    .updateTable('event_clients')
    .set({ token_hash: null, revoked_at: now })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}

export async function touchApiKey(db: Db, id: number, now: number): Promise<void> {
  await db.updateTable('event_clients').set({ last_used_at: now }).where('id', '=', id).execute()
}
