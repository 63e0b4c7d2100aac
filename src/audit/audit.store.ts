import type { FastifyBaseLogger } from 'fastify'
import { type Selectable, sql } from 'kysely'
import type { Clock } from '../platform/clock.js'
import type { Db, Dialect } from '../platform/db/database.js'
import { deleteDueBatch, type PruneCursor, type Pruned } from '../platform/db/prune.js'
import type { AuditLogTable } from '../platform/db/schema.js'
import { storageProblem } from '../platform/storage.js'

export type AuditOutcome = 'success' | 'failure' | 'denied'

export interface AuditEntry {
  kind: string
  /** Who acted, as `<role>:<id>` or the e-mail/phone tried; never a secret. */
  actor?: string | null
  ip?: string | null
  outcome: AuditOutcome
  detail?: Record<string, unknown>
}

export interface AuditLog {
  record(entry: AuditEntry): Promise<void>
}

/** While storage takes no writes, lost audit records are told at most this often, without a stack. */
const STORAGE_LINE_EVERY_MS = 60_000

/**
 * Security events go to the database. A failed audit write is logged and does not fail the request
 * that caused it: the request's own writes decide its outcome. A full disk or read-only database fails
 * every request's record: that is one line a minute with the count (the storage outage itself is
 * logged by readiness), not a stack trace per request.
 */
export function createAuditLog(db: Db, clock: Clock, log: FastifyBaseLogger): AuditLog {
  const lost = { since: 0, count: 0, toldAt: Number.NEGATIVE_INFINITY }
  return {
    async record(entry) {
      try {
        await insertAuditEntry(db, clock.now(), entry)
      } catch (err) {
        const problem = storageProblem(err)
        if (!problem) {
          log.error({ err, kind: entry.kind }, 'audit write failed')
          return
        }
        const now = clock.now()
        if (lost.count === 0) lost.since = now
        lost.count++
        if (now - lost.toldAt < STORAGE_LINE_EVERY_MS) return
        log.error(
          { kind: entry.kind, problem, code: (err as { code?: string }).code, lost: lost.count },
          `audit write failed: the database takes no writes (${problem}); ${lost.count} audit record${lost.count === 1 ? '' : 's'} not written since ${new Date(lost.since).toISOString()}`,
        )
        lost.toldAt = now
        lost.count = 0
      }
    },
  }
}

/** Writes one entry and lets a failure through, for callers that write it in their own transaction. */
export async function insertAuditEntry(db: Db, at: number, entry: AuditEntry): Promise<void> {
  await db
    .insertInto('audit_log')
    .values({
      at,
      kind: entry.kind,
      actor: entry.actor ?? null,
      ip: entry.ip ?? null,
      outcome: entry.outcome,
      detail: entry.detail ? JSON.stringify(entry.detail) : null,
    })
    .execute()
}

export type AuditRow = Omit<Selectable<AuditLogTable>, 'tx'>

/** A place in the forward order of the audit log: after the row (tx, id). `{ tx: 0, id: 0 }` is its start. */
export interface AuditCursor {
  tx: number
  id: number
}

export type AuditForwardRow = AuditRow & { tx: number }

const FORWARD_COLUMNS = ['id', 'at', 'kind', 'actor', 'ip', 'outcome', 'detail', 'tx'] as const

/**
 * On PostgreSQL, the oldest transaction still open when the statement's snapshot was taken: every row of
 * an older transaction is committed (or never will be), so none can appear behind it later.
 */
const settledBelow = sql<number>`(pg_snapshot_xmin(pg_current_snapshot())::text::bigint)`

/**
 * Entries after `after` in forward order, (tx, id), among the settled ones: on PostgreSQL only rows of
 * transactions older than every open one (a row whose transaction is still open may hold a smaller id
 * than rows committed already; those wait until it ends), on SQLite every row (one writer at a time:
 * ids are taken in commit order, tx is 0). A cursor handed out is thus never passed by a later commit.
 */
export async function listAuditAfter(
  db: Db,
  dialect: Dialect,
  opts: { after: AuditCursor; kind?: string; actor?: string; outcome?: string; limit: number },
): Promise<AuditForwardRow[]> {
  let q = db
    .selectFrom('audit_log')
    .select(FORWARD_COLUMNS)
    .where((eb) => eb(eb.refTuple('tx', 'id'), '>', eb.tuple(opts.after.tx, opts.after.id)))
  if (dialect === 'postgres') q = q.where('tx', '<', settledBelow)
  if (opts.kind !== undefined) q = q.where('kind', '=', opts.kind)
  if (opts.actor !== undefined) q = q.where('actor', '=', opts.actor)
  if (opts.outcome !== undefined) q = q.where('outcome', '=', opts.outcome)
  return q.orderBy('tx').orderBy('id').limit(opts.limit).execute()
}

/** The newest `limit` settled entries (see `listAuditAfter`), in forward order: where a follower starts. */
export async function listAuditNewestSettled(
  db: Db,
  dialect: Dialect,
  opts: { kind?: string; limit: number },
): Promise<AuditForwardRow[]> {
  let q = db.selectFrom('audit_log').select(FORWARD_COLUMNS)
  if (dialect === 'postgres') q = q.where('tx', '<', settledBelow)
  if (opts.kind !== undefined) q = q.where('kind', '=', opts.kind)
  const newest = await q.orderBy('tx', 'desc').orderBy('id', 'desc').limit(opts.limit).execute()
  return newest.reverse()
}

/** A sink's acknowledged cursor and its failures in a row; undefined before its first delivery. */
export async function readSinkState(db: Db, name: string) {
  return db.selectFrom('audit_sink').selectAll().where('name', '=', name).executeTakeFirst()
}

/** Stores a sink's state (cursor acknowledged, failures in a row). */
export async function writeSinkState(
  db: Db,
  state: { name: string; after: AuditCursor; failures: number; lastError: string | null; now: number },
): Promise<void> {
  const row = {
    after_tx: state.after.tx,
    after_id: state.after.id,
    failures: state.failures,
    last_error: state.lastError?.slice(0, 500) ?? null,
    updated_at: state.now,
  }
  await db
    .insertInto('audit_sink')
    .values({ name: state.name, ...row })
    .onConflict((oc) => oc.column('name').doUpdateSet(row))
    .execute()
}

/** One page of entries, newest first, older than the entry `before` when given. */
export async function pageAuditEntries(
  db: Db,
  opts: { before?: number; kind?: string; actor?: string; outcome?: string; limit: number },
): Promise<AuditRow[]> {
  let q = db.selectFrom('audit_log').select(['id', 'at', 'kind', 'actor', 'ip', 'outcome', 'detail'])
  if (opts.before !== undefined) q = q.where('id', '<', opts.before)
  if (opts.kind !== undefined) q = q.where('kind', '=', opts.kind)
  if (opts.actor !== undefined) q = q.where('actor', '=', opts.actor)
  if (opts.outcome !== undefined) q = q.where('outcome', '=', opts.outcome)
  return q.orderBy('id', 'desc').limit(opts.limit).execute()
}

/**
 * Deletes up to `limit` audit rows older than `before` (retention), oldest first: in (at, id) order
 * past `after`, over the index audit_log_at_id.
 */
export function pruneAudit(db: Db, before: number, limit: number, after?: PruneCursor): Promise<Pruned> {
  return deleteDueBatch(
    db,
    { table: 'audit_log', time: 'at', key: 'id', keyType: 'integer' },
    before,
    limit,
    after,
  )
}
