import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { sha256Hex } from '../platform/digest.js'
import { AppError, ConflictError, errorBody, ValidationFailed } from '../platform/errors.js'

/** How long an Idempotency-Key and its first answer are kept. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3600_000

const KEY = /^[\x21-\x7e]{1,255}$/

/** JSON with object keys sorted, so the same body always hashes the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  if (value && typeof value === 'object')
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`
  return JSON.stringify(value) ?? 'null'
}

export interface Answer<T> {
  status: number
  body: T
}

/**
 * Runs `fn` at most once per (API key, Idempotency-Key) within 24 hours. The first request reserves
 * the key (a primary-key insert, so two at once cannot both run); a retry with the same body gets the
 * first answer again, with `Idempotent-Replayed: true`; the same key with another request is 422, and
 * one that arrives while the first is still running is 409. Answers of 5xx are not kept, so a request
 * that failed on our side can be retried with the same key.
 */
export async function idempotent<T>(
  deps: { db: Db; clock: Clock },
  request: FastifyRequest,
  reply: FastifyReply,
  apiKeyId: number,
  fn: () => Promise<Answer<T>>,
): Promise<T> {
  const header = request.headers['idempotency-key']
  if (header === undefined) return send(reply, await fn())
  if (typeof header !== 'string' || !KEY.test(header))
    throw new ValidationFailed([
      {
        loc: ['header', 'idempotency-key'],
        msg: 'Value error, Idempotency-Key must be 1 to 255 visible ASCII characters',
        type: 'value_error',
      },
    ])
  const { db, clock } = deps
  const now = clock.now()
  const hash = sha256Hex(`${request.method} ${request.routeOptions.url} ${canonical(request.body)}`)
  const where = db.selectFrom('idempotency_keys').where('api_key_id', '=', apiKeyId).where('key', '=', header)
  // Expired keys of every partner go here (an index range, usually empty), this one's included.
  await db
    .deleteFrom('idempotency_keys')
    .where('created_at', '<', now - IDEMPOTENCY_WINDOW_MS)
    .execute()
  const reserved = await db
    .insertInto('idempotency_keys')
    .values({ api_key_id: apiKeyId, key: header, request_hash: hash, created_at: now })
    .onConflict((oc) => oc.columns(['api_key_id', 'key']).doNothing())
    .executeTakeFirst()
  if (
    Number(reserved.numInsertedOrUpdatedRows ?? 0) === 0 &&
    !(await takeOverAbandoned(db, apiKeyId, header, hash, now))
  ) {
    const first = await where.select(['request_hash', 'status_code', 'response']).executeTakeFirst()
    if (!first) throw new ConflictError('Idempotency-Key is being reused; retry', 'idempotency_key_in_use')
    if (first.request_hash !== hash)
      throw new ValidationFailed([
        {
          loc: ['header', 'idempotency-key'],
          msg: 'Value error, this Idempotency-Key was used with a different request',
          type: 'value_error',
        },
      ])
    if (first.status_code === null)
      throw new ConflictError(
        'A request with this Idempotency-Key is still being processed',
        'idempotency_key_in_use',
      )
    reply.header('idempotent-replayed', 'true')
    return send(reply, { status: first.status_code, body: JSON.parse(first.response ?? 'null') as T })
  }

  const store = (status: number, body: unknown) =>
    db
      .updateTable('idempotency_keys')
      .set({ status_code: status, response: JSON.stringify(body) })
      .where('api_key_id', '=', apiKeyId)
      .where('key', '=', header)
      .execute()
  let answer: Answer<T>
  try {
    answer = await fn()
  } catch (err) {
    if (err instanceof AppError && err.statusCode < 500) await store(err.statusCode, errorBody(err))
    else
      await db
        .deleteFrom('idempotency_keys')
        .where('api_key_id', '=', apiKeyId)
        .where('key', '=', header)
        .execute()
    throw err
  }
  await store(answer.status, answer.body)
  return send(reply, answer)
}

/** A reservation left unanswered this long belongs to a request that died (a crash, a restart). */
const ABANDONED_MS = 60_000

/** Takes over an abandoned reservation of the same request; true when this request now owns it. */
async function takeOverAbandoned(db: Db, apiKeyId: number, key: string, hash: string, now: number) {
  const r = await db
    .updateTable('idempotency_keys')
    .set({ created_at: now })
    .where('api_key_id', '=', apiKeyId)
    .where('key', '=', key)
    .where('request_hash', '=', hash)
    .where('status_code', 'is', null)
    .where('created_at', '<', now - ABANDONED_MS)
    .executeTakeFirst()
  return Number(r.numUpdatedRows) === 1
}

function send<T>(reply: FastifyReply, answer: Answer<T>): T {
  reply.code(answer.status)
  return answer.body
}
