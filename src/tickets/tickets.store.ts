import { sql } from 'kysely'
import type { Db } from '../platform/db/database.js'

/** A ticket (transfer) by its uid, with its event's uid and time zone, for a scan. */
export function findTransferToUse(db: Db, transferUid: string) {
  return db
    .selectFrom('transfers as t')
    .innerJoin('events as e', 'e.id', 't.event_id')
    .select([
      't.id',
      't.event_id',
      't.partner_id',
      't.email',
      't.company_ticket_id',
      't.used_at',
      't.used_timestamp',
      't.code_version',
      't.created_at',
      'e.uid',
      'e.timezone',
    ])
    .where('t.uid', '=', transferUid)
    .executeTakeFirst()
}

/**
 * Marks a ticket used unless it already is; undefined when another scan used it first, else whether the
 * scanned code version had been re-issued or was never issued. That is decided in the UPDATE itself,
 * against the row as it is then, so a re-issue committed a moment before the use is seen.
 */
export async function markUsed(
  db: Db,
  id: number,
  use: {
    used_at: number
    used_timestamp: string
    used_gate: string | null
    clockAdjusted: boolean
    /** The code version the device scanned, when it said. */
    version: number | undefined
    /** The scan carried a code that did not verify as one of this ticket's. */
    unknownCode: boolean
  },
): Promise<{ revokedCode: boolean; unknownCode: boolean } | undefined> {
  const { clockAdjusted, version, unknownCode, ...columns } = use
  const r = await db
    .updateTable('transfers')
    .set({
      status: 'USED',
      ...columns,
      used_clock_adjusted: clockAdjusted ? 1 : null,
      used_revoked_code:
        version === undefined ? null : sql<number | null>`case when code_version > ${version} then 1 end`,
      used_unknown_code: unknownCode
        ? 1
        : version === undefined
          ? null
          : sql<number | null>`case when code_version < ${version} then 1 end`,
    })
    .where('id', '=', id)
    .where('status', '<>', 'USED')
    .returning(['used_revoked_code', 'used_unknown_code'])
    .executeTakeFirst()
  return r && { revokedCode: r.used_revoked_code === 1, unknownCode: r.used_unknown_code === 1 }
}

/** When (epoch ms and local time) a used ticket was used. */
export async function useOf(db: Db, id: number) {
  return db
    .selectFrom('transfers')
    .select(['used_at', 'used_timestamp'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow()
}

/**
 * The latest uses of an event that were scans of a re-issued (revoked) or unknown code, newest first: a
 * leaked old code reached a gate before the holder's new one, or a device uploaded a code the service
 * never issued for the ticket. The dashboard lists them for follow-up. The condition is the one of the
 * partial index `transfers_code_flagged_uses` (migration 024), with literals rather than parameters so
 * that both databases can prove it and use the index.
 */
export function flaggedCodeUses(db: Db, eventId: number, limit: number, partnerIds?: number[]) {
  if (partnerIds?.length === 0) return Promise.resolve([])
  return db
    .selectFrom('transfers')
    .select([
      'uid',
      'company_ticket_id',
      'used_timestamp',
      'used_gate',
      'code_version',
      'used_revoked_code',
      'used_unknown_code',
    ])
    .where('event_id', '=', eventId)
    .$if(partnerIds !== undefined, (q) => q.where('partner_id', 'in', partnerIds!))
    .where((eb) =>
      eb.or([eb('used_revoked_code', '=', sql.lit(1)), eb('used_unknown_code', '=', sql.lit(1))]),
    )
    .orderBy('used_at', 'desc')
    .limit(limit)
    .execute()
}
