import type { Db, Dialect } from '../platform/db/database.js'
import {
  type AuditCursor,
  type AuditEntry,
  type AuditForwardRow,
  type AuditRow,
  insertAuditEntry,
  listAuditAfter,
  pageAuditEntries,
} from './audit.store.js'

export type { AuditCursor, AuditForwardRow, AuditRow } from './audit.store.js'

/**
 * Writes one entry in the caller's transaction, so an action and its record commit together or not at
 * all (`wristband`'s break-glass commands; the service's own records go through `createAuditLog`).
 */
export function recordInTransaction(tx: Db, at: number, entry: AuditEntry): Promise<void> {
  return insertAuditEntry(tx, at, entry)
}

/** A cursor as handed out: `<tx>-<id>` (opaque to readers; `0-0` is the start of the log). */
export const CURSOR_PATTERN = '^[0-9]{1,19}-[0-9]{1,19}$'

export function formatCursor(c: AuditCursor): string {
  return `${c.tx}-${c.id}`
}

/** Reads a cursor of `formatCursor`; undefined when it is none. */
export function parseCursor(raw: string): AuditCursor | undefined {
  const m = /^(\d{1,19})-(\d{1,19})$/.exec(raw)
  if (!m) return undefined
  const tx = Number(m[1])
  const id = Number(m[2])
  return Number.isSafeInteger(tx) && Number.isSafeInteger(id) ? { tx, id } : undefined
}

// The forward reads of `wristband audit` are the store's, re-exported: entries after a cursor
// (`--after/--follow`, the sink too) and the newest a forward reader may have (where it starts). A
// function that only renames a store call is not kept.
export { listAuditAfter, listAuditNewestSettled } from './audit.store.js'

/** An entry as the API, the command line and the sink give it. */
export function presentEntry(r: AuditRow) {
  return {
    id: r.id,
    at: new Date(r.at).toISOString(),
    kind: r.kind,
    actor: r.actor,
    ip: r.ip,
    outcome: r.outcome,
    detail: r.detail === null ? null : (JSON.parse(r.detail) as Record<string, unknown>),
  }
}

/** An entry of a forward read, with the cursor that resumes after it. */
export function presentForward(r: AuditForwardRow) {
  return { ...presentEntry(r), cursor: formatCursor(r) }
}

export interface AuditServiceDeps {
  db: Db
  database: { dialect: Dialect }
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
      items: page.map(presentEntry),
      next_before: rows.length > limit ? page[page.length - 1]!.id : null,
      next_after: null,
    }
  }

  /**
   * One page forwards: the entries after `after`, oldest first, each with its cursor, and the cursor to
   * ask with next (the last entry's, or `after` itself when nothing new is settled yet).
   */
  async pageAfter(after: AuditCursor, filters: Omit<AuditFilters, 'before'>, limit: number) {
    const rows = await listAuditAfter(this.deps.db, this.deps.database.dialect, { ...filters, after, limit })
    const last = rows[rows.length - 1]
    return {
      items: rows.map(presentForward),
      next_before: null,
      next_after: formatCursor(last ?? after),
    }
  }
}
