import { sql } from 'kysely'
import type { Db } from '../platform/db/database.js'
import { deleteDueBatch, type PruneCursor, type Pruned } from '../platform/db/prune.js'
import type { RevocationSetBuilder } from './revocation-set.js'
import type { Revocation } from './revocations.js'

/** Writes revocations; one already there is left as it is. */
export async function insertRevocations(db: Db, now: number, entries: Revocation[]): Promise<void> {
  if (entries.length === 0) return
  // The load at start reads the list as lines (liveRevocationLines): a jti with a line break in it
  // would be read as two wrong ones. The service's jtis never have one; this keeps it so.
  if (entries.some((e) => e.jti.includes('\n'))) throw new Error('a jti must not contain a line break')
  await db
    .insertInto('revoked_tokens')
    .values(entries.map((e) => ({ jti: e.jti, expires_at: e.expiresAt, revoked_at: now })))
    .onConflict((oc) => oc.column('jti').doNothing())
    .execute()
}

/**
 * A page of the revocations that have not expired at `after.expiresAt`, in (expires_at, jti) order
 * after `after`: a walk along the covering index of both columns (migration 041), so a page reads the
 * index only, in its order, never the table's rows in random key order.
 */
export function liveRevocationsPage(db: Db, after: { expiresAt: number; jti: string }, limit: number) {
  return db
    .selectFrom('revoked_tokens')
    .select(['jti', 'expires_at'])
    .where(({ eb, refTuple, tuple }) =>
      eb(refTuple('expires_at', 'jti'), '>', tuple(after.expiresAt, after.jti)),
    )
    .orderBy('expires_at')
    .orderBy('jti')
    .limit(limit)
    .execute()
}

/**
 * The same page as `liveRevocationsPage`, as one string of `<expires_at> <jti>` lines in that order
 * (empty when none is left): the load at start reads a million of them, and one string a page, where
 * an object a row grew the process's young generation by about 120 MB that it kept (bench:scale).
 * `string_agg` with an ordered argument is in PostgreSQL and in SQLite from 3.44.
 */
export async function liveRevocationLines(
  db: Db,
  after: { expiresAt: number; jti: string },
  limit: number,
): Promise<string> {
  const page = db
    .selectFrom('revoked_tokens')
    .select(['jti', 'expires_at'])
    .where(({ eb, refTuple, tuple }) =>
      eb(refTuple('expires_at', 'jti'), '>', tuple(after.expiresAt, after.jti)),
    )
    .orderBy('expires_at')
    .orderBy('jti')
    .limit(limit)
    .as('page')
  const row = await db
    .selectFrom(page)
    .select(
      sql<
        string | null
      >`string_agg(cast(page.expires_at as text) || ' ' || page.jti, ${'\n'} order by page.expires_at, page.jti)`.as(
        'lines',
      ),
    )
    .executeTakeFirst()
  return row?.lines ?? ''
}

/**
 * Deletes up to `limit` revocations that expired before `before` (retention), in (expires_at, jti)
 * order past `after`, over the index revoked_tokens_live.
 */
export function pruneExpiredRevocations(
  db: Db,
  before: number,
  limit: number,
  after?: PruneCursor,
): Promise<Pruned> {
  return deleteDueBatch(
    db,
    { table: 'revoked_tokens', time: 'expires_at', key: 'jti', keyType: 'text' },
    before,
    limit,
    after,
  )
}

/** The newest `revoked_at` of every revocation, expired ones included (undefined when there is none). */
export async function newestRevokedAt(db: Db): Promise<number | undefined> {
  const r = await db
    .selectFrom('revoked_tokens')
    .select((eb) => eb.fn.max('revoked_at').as('newest'))
    .executeTakeFirst()
  return r?.newest == null ? undefined : Number(r.newest)
}

/** The revocations written at or after `from`. */
export function revocationsSince(db: Db, from: number) {
  return db
    .selectFrom('revoked_tokens')
    .select(['jti', 'expires_at', 'revoked_at'])
    .where('revoked_at', '>=', from)
    .execute()
}

export async function isRevokedInDb(db: Db, jti: string): Promise<boolean> {
  const row = await db.selectFrom('revoked_tokens').select('jti').where('jti', '=', jti).executeTakeFirst()
  return row !== undefined
}

/**
 * Every revocation live at `now` into `builder`, page by page in (expires_at, jti) order, up to
 * `maxPages` pages, the first of them `first` when given (the lines of the first page, read already);
 * `account` is given the jtis that start with `prefix`; `between` runs before each page read. Resolves
 * with undefined once every live revocation was read, else with the lines of the last page read: given
 * as `first` to another reader (the load's child process), it goes on after it without reading it again.
 */
export async function readLiveRevocations(
  db: Db,
  now: number,
  pageSize: number,
  builder: RevocationSetBuilder,
  prefix: string,
  account: (jti: string, expiresAt: number) => void,
  between: () => Promise<void> = async () => {},
  maxPages = Number.POSITIVE_INFINITY,
  first?: string,
): Promise<string | undefined> {
  let after = { expiresAt: now, jti: '' }
  let lines = first
  for (let pages = 1; ; pages++) {
    if (lines === undefined) {
      await between()
      lines = await liveRevocationLines(db, after, pageSize)
    }
    const page = builder.addLines(lines, prefix, account)
    if (!page || page.count < pageSize) return undefined
    if (pages >= maxPages) return lines
    after = page
    lines = undefined
  }
}
