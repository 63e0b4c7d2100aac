import type { FastifyBaseLogger } from 'fastify'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'

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

/**
 * Security events go to the database. A failed audit write is logged and does not fail the request
 * that caused it: the request's own writes decide its outcome.
 */
export function createAuditLog(db: Db, clock: Clock, log: FastifyBaseLogger): AuditLog {
  return {
    async record(entry) {
      try {
        await db
          .insertInto('audit_log')
          .values({
            at: clock.now(),
            kind: entry.kind,
            actor: entry.actor ?? null,
            ip: entry.ip ?? null,
            outcome: entry.outcome,
            detail: entry.detail ? JSON.stringify(entry.detail) : null,
          })
          .execute()
      } catch (err) {
        log.error({ err, kind: entry.kind }, 'audit write failed')
      }
    },
  }
}
