import { type Kysely, sql } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Uses of unknown codes (the gate audit's F2 and F4). Only additions, so the previous release keeps
 * running beside this one: its uses leave the new column null, which means what it meant there (not
 * flagged), and it never reads it.
 *
 * - `transfers.used_unknown_code` (1 or null): the use was an offline scan of a code the service never
 *   issued for the ticket: a version above the ticket's current one, or a code (sent with the scan) that
 *   does not verify as one of this ticket's codes. The scan still counted (a person who got in is never
 *   lost); the dashboard lists such uses beside those of re-issued codes.
 * - A partial index serving that list (both flags), as `transfers_flagged_uses` (014) serves the
 *   previous release's list of re-issued codes alone; that one stays for it.
 */
export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  await db.schema.alterTable('transfers').addColumn('used_unknown_code', 'integer').execute()
  await db.schema
    .createIndex('transfers_code_flagged_uses')
    .on('transfers')
    .columns(['event_id', 'used_at'])
    .where(sql<boolean>`used_revoked_code = 1 or used_unknown_code = 1`)
    .execute()
}
