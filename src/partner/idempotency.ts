import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { sha256Hex } from '../platform/digest.js'
import { AppError, ConflictError, errorBody, ValidationFailed } from '../platform/errors.js'
import {
  deleteExpiredKeys,
  findKey,
  keepAnswer,
  keepStored,
  releaseKey,
  reserveKey,
  takeOverKey,
} from './idempotency.store.js'

/** How long an Idempotency-Key and its first answer are kept. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3600_000
/** A reservation left unanswered this long belongs to a request that died (a crash, a restart). */
const ABANDONED_MS = 60_000

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
 * How a route whose answers carry ticket codes has them kept and replayed. No stored copy of an
 * answer holds a code (a code admits its holder at the gate): `keep` is what the record stores, the
 * answer with its codes null (the transfer_uid stays as the reference), and `replay` renders the
 * codes again from the transfers as they are now, so a transfer re-issued since comes back with its
 * current code. `replay` also reads records the previous release kept, whole answers with the code
 * they were first given, and replaces that code the same way. Only success answers carry codes.
 */
export interface Keeping<T> {
  keep(body: T): T
  replay(kept: T): Promise<T>
}

const asIs: Keeping<unknown> = { keep: (body) => body, replay: async (kept) => kept }

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
  keeping: Keeping<T> = asIs as Keeping<T>,
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
  const held = { apiKeyId, key: header }
  // Expired keys of every partner go here, this one's included.
  await deleteExpiredKeys(db, now - IDEMPOTENCY_WINDOW_MS)
  if (
    !(await reserveKey(db, held, hash, now)) &&
    !(await takeOverKey(db, held, hash, now, now - ABANDONED_MS))
  ) {
    const first = await findKey(db, held)
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
    const kept = JSON.parse(first.response ?? 'null') as T
    if (first.status_code >= 400) {
      reply.header('idempotent-replayed', 'true')
      return send(reply, { status: first.status_code, body: kept })
    }
    const body = await keeping.replay(kept)
    // A record of the previous release (its answer with the codes): kept again without them.
    const stripped = JSON.stringify(keeping.keep(kept))
    if (stripped !== first.response) await keepStored(db, held, first.status_code, stripped)
    reply.header('idempotent-replayed', 'true')
    return send(reply, { status: first.status_code, body })
  }

  let answer: Answer<T>
  try {
    answer = await fn()
  } catch (err) {
    if (err instanceof AppError && err.statusCode < 500)
      await keepAnswer(db, held, err.statusCode, errorBody(err))
    else await releaseKey(db, held)
    throw err
  }
  await keepAnswer(db, held, answer.status, keeping.keep(answer.body))
  return send(reply, answer)
}

function send<T>(reply: FastifyReply, answer: Answer<T>): T {
  reply.code(answer.status)
  return answer.body
}
