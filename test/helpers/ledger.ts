// A crowd of tickets written straight into the ledger, as the service would hold them after that many
// transfers (a code digest each, a position in the event's sync feed): for the feed's bench and the
// browser scanner's half-million-ticket test, where the partner API would take hours.
import { randomBytes } from 'node:crypto'
import type { Db } from '../../src/platform/db/database.js'

/**
 * Writes `count` unused transfers of a ticket type into an event that has none yet, in feed positions
 * 1..count, and moves the event's feed counter there; resolves to their uids.
 */
export async function fillLedger(
  db: Db,
  o: { eventId: number; ticketTypeId: number; count: number; now: number; email?: string },
): Promise<string[]> {
  const email = o.email ?? 'crowd@example.com'
  const link = await db
    .insertInto('holder_links')
    .values({ event_id: o.eventId, email, created_at: o.now, updated_at: o.now })
    .returning('id')
    .executeTakeFirstOrThrow()
  const uids = Array.from({ length: o.count }, () => randomBytes(16).toString('hex'))
  await db.transaction().execute(async (tx) => {
    for (let i = 0; i < o.count; i += 1000) {
      const rows = Array.from({ length: Math.min(1000, o.count - i) }, (_, j) => ({
        uid: uids[i + j]!,
        event_id: o.eventId,
        ticket_type_id: o.ticketTypeId,
        company_ticket_id: `crowd-${i + j}`,
        email,
        balance: 0,
        promo_balance: 0,
        access_gate: null,
        seat_number: null,
        link_id: link.id,
        status: 'TRANSFERRED',
        created_at: o.now,
        code_digest: randomBytes(16).toString('base64url').slice(0, 22),
        feed_seq: i + j + 1,
      }))
      // PostgreSQL takes at most 65,535 parameters per statement: 1000 rows of 14 columns fit.
      await tx.insertInto('transfers').values(rows).execute()
    }
    await tx.updateTable('events').set({ feed_seq: o.count }).where('id', '=', o.eventId).execute()
  })
  return uids
}
