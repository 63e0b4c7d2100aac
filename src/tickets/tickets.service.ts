import { markChanged } from '../edge/scan-sync.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { LocalTimeFormatter } from '../platform/formats.js'
import { type Claims, hasScope } from '../tokens/claims.js'
import { queueNotification } from '../webhooks/webhooks.store.js'
import { findTransferToUse, markUsed, usedTimestampOf } from './tickets.store.js'

export interface TicketsServiceDeps {
  db: Db
  clock: Clock
  /** Called after a notification was committed, so it goes out without waiting for the next poll. */
  runDueJobs: () => void
}

export type ScanOutcome =
  | { status: 'USED'; used_timestamp: string }
  | { status: 'ALREADY_USED'; used_timestamp: string }
  | { status: 'NOT_FOUND' }
  | { status: 'FORBIDDEN' }

/**
 * Ticket use: the first use wins through a conditional UPDATE (… where status <> 'USED'), so of two
 * scans at once exactly one changes the row; the use notification is written in the same transaction
 * (transactional outbox), so a USED ticket without its notification cannot exist.
 */
export class TicketsService {
  private readonly localTime = new LocalTimeFormatter()

  constructor(private readonly deps: TicketsServiceDeps) {}

  async use(
    claims: Claims,
    scopes: readonly string[],
    transferUid: string,
    scan: { usedAt: number; gate: string | null },
  ): Promise<ScanOutcome> {
    const { db } = this.deps
    const t = await findTransferToUse(db, transferUid)
    if (!t) return { status: 'NOT_FOUND' }
    if (!scopes.some((s) => hasScope(claims, t.event_id, s))) return { status: 'FORBIDDEN' }
    if (t.used_timestamp !== null) return { status: 'ALREADY_USED', used_timestamp: t.used_timestamp }

    const usedTimestamp = this.localTime.format(scan.usedAt, t.timezone)
    const now = this.deps.clock.now()
    const outcome = await db.transaction().execute(async (tx) => {
      const won = await markUsed(tx, t.id, {
        used_at: scan.usedAt,
        used_timestamp: usedTimestamp,
        used_gate: scan.gate,
      })
      if (!won) return { won: false, notified: false }
      // Scanners learn of the use through the sync feed.
      await markChanged(tx, t.id, t.event_id)
      const notified = await queueNotification(tx, now, t.event_id, t.id, {
        event_uid: t.uid,
        transfer_uid: transferUid,
        user_email: t.email,
        company_ticket_id: t.company_ticket_id,
        status: 'USED',
        used_timestamp: usedTimestamp,
      })
      return { won: true, notified }
    })
    if (outcome.notified) this.deps.runDueJobs()
    if (outcome.won) return { status: 'USED', used_timestamp: usedTimestamp }
    return { status: 'ALREADY_USED', used_timestamp: (await usedTimestampOf(db, t.id))! }
  }
}
