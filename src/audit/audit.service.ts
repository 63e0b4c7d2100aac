import type { Db } from '../platform/db/database.js'
import { type AuditEntry, insertAuditEntry, listAuditEntries, pageAuditEntries } from './audit.store.js'

export type { AuditRow } from './audit.store.js'

/**
 * Writes one entry in the caller's transaction, so an action and its record commit together or not at
 * all (`wristband`'s break-glass commands; the service's own records go through `createAuditLog`).
 */
export function recordInTransaction(tx: Db, at: number, entry: AuditEntry): Promise<void> {
  return insertAuditEntry(tx, at, entry)
}

/** Entries after `afterId`, oldest first, or the newest `limit` without it: `wristband audit [--follow]`. */
export function tailAuditLog(db: Db, opts: { afterId?: number; kind?: string; limit: number }) {
  return listAuditEntries(db, opts)
}

export interface AuditServiceDeps {
  db: Db
}

export interface AuditFilters {
  kind?: string
  actor?: string
  outcome?: string
  before?: number
}

/** Reading the audit log (writing it is `createAuditLog`'s). */
export class AuditService {
  constructor(private readonly deps: AuditServiceDeps) {}

  /** One page of entries, newest first, and the `before` of the next (older) page. */
  async page(filters: AuditFilters, limit: number) {
    // One extra row tells whether an older page exists.
    const rows = await pageAuditEntries(this.deps.db, { ...filters, limit: limit + 1 })
    const page = rows.slice(0, limit)
    return {
      items: page.map((r) => ({
        ...r,
        at: new Date(r.at).toISOString(),
        detail: r.detail === null ? null : (JSON.parse(r.detail) as Record<string, unknown>),
      })),
      next_before: rows.length > limit ? page[page.length - 1]!.id : null,
    }
  }
}
