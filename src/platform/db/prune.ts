import { sql } from 'kysely'
import type { Db } from './database.js'
import type { Database } from './schema.js'

/**
 * Retention's keyset: where a drain of a table stopped, as the (time, key) of the last row its batch
 * read, in the order of the table's (time, key) index. The next batch starts past it, so it never walks
 * the index entries of the rows earlier batches deleted (PostgreSQL keeps them until a vacuum).
 */
export type PruneCursor = readonly [at: number, key: string | number]

export interface Pruned {
  deleted: number
  /** The last row the batch read: the next batch of the drain starts past it (absent: it read none). */
  last?: PruneCursor
  /** The batch read as many rows as it may: more may be due past `last`. */
  full: boolean
}

/**
 * A batch that read `read` (each row's time and key) of at most `limit` and deleted `deleted`. Its last
 * row is the greatest (time, key) among them: the database ordered them (in its collation, for text
 * keys); comparing here can pick a row at or before its last one, never past it, so whatever the
 * collation no row is skipped.
 */
export function pruned(read: readonly PruneCursor[], limit: number, deleted = read.length): Pruned {
  let last: PruneCursor | undefined
  for (const r of read) if (last === undefined || isAfter(r, last)) last = r
  return last === undefined ? { deleted, full: false } : { deleted, last, full: read.length >= limit }
}

function isAfter([at, key]: PruneCursor, [lastAt, lastKey]: PruneCursor): boolean {
  if (at !== lastAt) return at > lastAt
  return typeof key === 'number' && typeof lastKey === 'number'
    ? key > lastKey
    : String(key) > String(lastKey)
}

/**
 * A table whose due rows retention deletes in (time, key) order, over an index on those two columns:
 * the time a row is due by, its unique key, and whether the key is text or an integer (the cursor
 * carries it as either).
 */
export interface DueRows<T extends keyof Database> {
  table: T
  time: keyof Database[T] & string
  key: keyof Database[T] & string
  keyType: 'text' | 'integer'
}

/**
 * Deletes up to `limit` rows of `due.table` whose time is before `before`, in (time, key) order past
 * `after`, in one statement: the batch of every table that keeps no other rows with the ones it deletes.
 */
export async function deleteDueBatch<T extends keyof Database>(
  db: Db,
  due: DueRows<T>,
  before: number,
  limit: number,
  after?: PruneCursor,
): Promise<Pruned> {
  const table = sql.table(due.table)
  const time = sql.ref(due.time)
  const key = sql.ref(due.key)
  const keyOf = (k: unknown) => (due.keyType === 'text' ? String(k) : Number(k))
  const past = after === undefined ? sql`` : sql`and (${time}, ${key}) > (${after[0]}, ${keyOf(after[1])})`
  const { rows } = await sql<{ at: number | string; key: number | string }>`
    delete from ${table} where ${key} in (
      select ${key} from ${table} where ${time} < ${before} ${past} order by ${time}, ${key} limit ${limit}
    ) returning ${time} as at, ${key} as key`.execute(db)
  return pruned(
    rows.map((r) => [Number(r.at), keyOf(r.key)] as const),
    limit,
  )
}
