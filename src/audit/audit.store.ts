import type { FastifyBaseLogger } from 'fastify'
import type { Selectable } from 'kysely'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
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

export type AuditRow = Selectable<AuditLogTable>

/** Entries after `afterId`, oldest first; or the newest `limit` entries when `afterId` is absent. */
export async function listAuditEntries(
  db: Db,
  opts: { afterId?: number; kind?: string; limit: number },
): Promise<AuditRow[]> {
  let q = db.selectFrom('audit_log').select(['id', 'at', 'kind', 'actor', 'ip', 'outcome', 'detail'])
  if (opts.kind !== undefined) q = q.where('kind', '=', opts.kind)
  if (opts.afterId !== undefined)
    return q.where('id', '>', opts.afterId).orderBy('id').limit(opts.limit).execute()
  const newest = await q.orderBy('id', 'desc').limit(opts.limit).execute()
  return newest.reverse()
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

/** Deletes up to `limit` audit rows older than `before` (retention), oldest first; returns how many. */
export async function pruneAudit(db: Db, before: number, limit: number): Promise<number> {
  const r = await db
    .deleteFrom('audit_log')
    .where(
      'id',
      'in',
      db.selectFrom('audit_log').select('id').where('at', '<', before).orderBy('at').limit(limit),
    )
    .executeTakeFirst()
  return Number(r.numDeletedRows)
}
