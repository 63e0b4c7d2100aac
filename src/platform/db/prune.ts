/**
 * Retention's keyset: where a drain of a table stopped, as the (time, key) of the last row its batch
 * read, in the order of the table's (time, key) index. The next batch starts past it, so it never walks
 * the index entries of the rows earlier batches deleted (PostgreSQL keeps them until a vacuum).
 */
export type PruneCursor = readonly [at: number, key: string | number]

export interface Pruned {
  deleted: number
  /** Where the next batch starts; absent when this batch was not full (the table is drained). */
  next?: PruneCursor
}

/**
 * The cursor after a batch that read `rows` of at most `limit`: the greatest (time, key) among them.
 * The database ordered them (its collation for text keys); comparing here can only pick a row at or
 * before its last one, never past it, so no row is skipped whatever the collation.
 */
export function nextCursor(rows: readonly PruneCursor[], limit: number): PruneCursor | undefined {
  if (rows.length < limit) return undefined
  let last = rows[0]
  for (const r of rows) if (last === undefined || isAfter(r, last)) last = r
  return last
}

function isAfter([at, key]: PruneCursor, [lastAt, lastKey]: PruneCursor): boolean {
  if (at !== lastAt) return at > lastAt
  return typeof key === 'number' && typeof lastKey === 'number'
    ? key > lastKey
    : String(key) > String(lastKey)
}
