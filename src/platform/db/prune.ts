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
