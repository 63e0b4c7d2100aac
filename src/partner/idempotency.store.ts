import type { Db } from '../platform/db/database.js'

/** One partner's Idempotency-Key: the API key it came with and the key itself. */
export interface IdempotencyKey {
  apiKeyId: number
  key: string
}

/** Drops the keys of every partner created before `before` (an index range, usually empty). */
export async function deleteExpiredKeys(db: Db, before: number): Promise<void> {
  await db.deleteFrom('idempotency_keys').where('created_at', '<', before).execute()
}

/** Reserves a key for a request (a primary-key insert); false when the key is already taken. */
export async function reserveKey(
  db: Db,
  k: IdempotencyKey,
  requestHash: string,
  now: number,
): Promise<boolean> {
  const r = await db
    .insertInto('idempotency_keys')
    .values({ api_key_id: k.apiKeyId, key: k.key, request_hash: requestHash, created_at: now })
    .onConflict((oc) => oc.columns(['api_key_id', 'key']).doNothing())
    .executeTakeFirst()
  return Number(r.numInsertedOrUpdatedRows ?? 0) > 0
}

/**
 * Takes over a reservation of the same request left unanswered since before `abandonedBefore`;
 * true when this request now owns it.
 */
export async function takeOverKey(
  db: Db,
  k: IdempotencyKey,
  requestHash: string,
  now: number,
  abandonedBefore: number,
): Promise<boolean> {
  const r = await db
    .updateTable('idempotency_keys')
    .set({ created_at: now })
    .where('api_key_id', '=', k.apiKeyId)
    .where('key', '=', k.key)
    .where('request_hash', '=', requestHash)
    .where('status_code', 'is', null)
    .where('created_at', '<', abandonedBefore)
    .executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}

export function findKey(db: Db, k: IdempotencyKey) {
  return db
    .selectFrom('idempotency_keys')
    .select(['request_hash', 'status_code', 'response'])
    .where('api_key_id', '=', k.apiKeyId)
    .where('key', '=', k.key)
    .executeTakeFirst()
}

/** Keeps the answer given to the request that holds the key (as `Keeping.keep` made it: no ticket codes). */
export async function keepAnswer(db: Db, k: IdempotencyKey, status: number, body: unknown): Promise<void> {
  await keepStored(db, k, status, JSON.stringify(body))
}

/** Keeps an answer already in its stored form (JSON). */
export async function keepStored(db: Db, k: IdempotencyKey, status: number, response: string): Promise<void> {
  await db
    .updateTable('idempotency_keys')
    .set({ status_code: status, response })
    .where('api_key_id', '=', k.apiKeyId)
    .where('key', '=', k.key)
    .execute()
}

/** Frees a key whose request failed on our side, so it can be retried with the same key. */
export async function releaseKey(db: Db, k: IdempotencyKey): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('api_key_id', '=', k.apiKeyId)
    .where('key', '=', k.key)
    .execute()
}
