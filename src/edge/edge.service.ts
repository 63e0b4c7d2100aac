import { eventExists } from '../events/events.store.js'
import type { Partner } from '../partner/partner-auth.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { ConflictError, NotFoundError, ServiceUnavailableError } from '../platform/errors.js'
import type { EdgeKeys } from './edge-keys.js'
import { feedPage, findTransferForReissue, replaceCode } from './scan-sync.store.js'
import type { TicketCodes } from './ticket-codes.js'

export interface EdgeServiceDeps {
  db: Db
  clock: Clock
  keys: EdgeKeys
  codes: TicketCodes
}

/** Offline at the gate: the scanner sync feed and the re-issue of a ticket code. */
export class EdgeService {
  constructor(private readonly deps: EdgeServiceDeps) {}

  /** The event's tickets changed after `cursor`, at most `limit`, and the cursor of the next page. */
  async feed(eventId: number, cursor: number, limit: number) {
    const { db, keys } = this.deps
    if (!(await eventExists(db, eventId))) throw new NotFoundError('Event not found')
    const rows = await feedPage(db, eventId, cursor, limit + 1)
    const page = rows.slice(0, limit)
    return {
      event_id: eventId,
      key_ids: keys.keys.map((k) => k.kid),
      tickets: page.map((r) => ({
        transfer_uid: r.transfer_uid,
        ticket_uid: r.ticket_uid,
        change:
          r.used_timestamp !== null
            ? ('used' as const)
            : r.code_version > 1
              ? ('revoked' as const)
              : ('new' as const),
        version: r.code_version,
        digest: r.code_digest,
        used_timestamp: r.used_timestamp,
        used_gate: r.used_gate,
      })),
      cursor: String(page.length ? Number(page[page.length - 1]!.feed_seq) : cursor),
      has_more: rows.length > limit,
    }
  }

  /** A new code for a partner's transfer; the previous versions are revoked. A used ticket keeps its code. */
  async reissue(partner: Partner, companyTicketId: string) {
    const { db, codes, clock } = this.deps
    const t = await findTransferForReissue(db, partner.eventId, companyTicketId)
    if (!t) throw new NotFoundError('No transfer with this company_ticket_id in this event')
    if (!codes.enabled) throw new ServiceUnavailableError('The service has no edge signing key')
    const used = () =>
      new ConflictError('A used ticket keeps its code', 'already_used', {
        used_timestamp: t.used_timestamp,
      })
    if (t.used_timestamp !== null) throw used()
    const code = (await codes.issue({
      eventId: partner.eventId,
      transferUid: t.uid,
      ticketUid: t.ticket_uid,
      version: t.code_version + 1,
      issuedAt: clock.now(),
      ticketDate: t.ticket_date,
    }))!
    if (!(await replaceCode(db, { id: t.id, eventId: partner.eventId, fromVersion: t.code_version }, code)))
      throw new ConflictError('The ticket was used or re-issued meanwhile', 'concurrent_change')
    return {
      transfer_uid: t.uid,
      company_ticket_id: companyTicketId,
      code_version: t.code_version + 1,
      ticket_code: code.code,
    }
  }
}
