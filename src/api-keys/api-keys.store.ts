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
] as const
type Row = Pick<Selectable<EventClientsTable>, (typeof columns)[number]>
/** An API key as the routes show it: the stored row with its scopes parsed (never the key's hash). */
export type ApiKeyRecord = Omit<Row, 'scopes'> & { scopes: string[] }

const toRecord = (r: Row): ApiKeyRecord => ({ ...r, scopes: JSON.parse(r.scopes) as string[] })

/** Creates a key; the plaintext (`wb_` + 43 URL-safe characters) exists only in the return value. */
export async function createApiKey(
  db: Db,
  input: { event_id: number; name: string; scopes: string[]; created_by: string | null; now: number },
): Promise<{ record: ApiKeyRecord; plaintext: string }> {
  const plaintext = `${API_KEY_PREFIX}${randomToken(32)}`
  const row = await db
    .insertInto('event_clients')
    .values({
      event_id: input.event_id,
      name: input.name,
      scopes: JSON.stringify(input.scopes),
      token_hash: sha256Hex(plaintext),
      key_prefix: plaintext.slice(0, 10),
      created_by: input.created_by,
      created_at: input.now,
    })
    .returning(columns)
    .executeTakeFirstOrThrow()
  return { record: toRecord(row), plaintext }
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

/** Revokes by clearing the stored hash (auth-service.md rule 11); false when already revoked. */
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
