import { type Kysely, sql } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * The gate in the field. Only additions, so the previous release keeps running beside this
 * one: its inserts leave the new columns at their defaults, which mean what they meant before.
 *
 * - `devices.token_generation`: the generation of the offline tokens a device is issued. Archiving the
 *   device, rotating its key or `wristband device revoke` ends the current generation (a revocation entry
 *   `device:<id>:<generation>`) and starts the next, so every token issued to the device before dies at once.
 * - An index on `lower(dev_mac)`: devices are looked up by MAC case-insensitively.
 * - `transfers.used_clock_adjusted` and `used_revoked_code` (1 or null): how a use was recorded. A scan
 *   whose device time lay outside the accepted window was recorded at the service's time; a scan of a
 *   code version that had been re-issued still counted. The partial index serves the dashboard's list of
 *   such uses (few rows, so a small index).
 * - An index on transfers (event_id, id): the pages of a scanner's first sync.
 */
export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  await db.schema
    .alterTable('devices')
    .addColumn('token_generation', 'integer', (c) => c.notNull().defaultTo(0))
    .execute()
  await db.schema.createIndex('devices_dev_mac_lower').on('devices').expression(sql`lower(dev_mac)`).execute()
  for (const column of ['used_clock_adjusted', 'used_revoked_code'])
    await db.schema.alterTable('transfers').addColumn(column, 'integer').execute()
  await db.schema
    .createIndex('transfers_flagged_uses')
    .on('transfers')
    .columns(['event_id', 'used_at'])
    .where(sql.ref('used_revoked_code'), '=', 1)
    .execute()
  // A scanner's first sync reads an event's tickets in id order (a snapshot, page by page).
  await db.schema.createIndex('transfers_event_id').on('transfers').columns(['event_id', 'id']).execute()
}
