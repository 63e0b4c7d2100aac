import { type Kysely, sql } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Retention deletes each table in batches that start where the last one stopped: past the (time, key)
 * of the last row it deleted, in that order. Each table's index on the time alone gives way to one on
 * (time, key), which serves that order (on PostgreSQL the entries of one time are otherwise in no order
 * a query can name) and every query the old one served. The revocations have theirs already
 * (revoked_tokens_live, 041); the jobs keep jobs_due. The previous release runs beside this one
 * unchanged: its retention and filters use the new indexes by their first column.
 */
export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  for (const [table, old, index, columns] of [
    ['refresh_tokens', 'refresh_tokens_expires', 'refresh_tokens_expires_jti', ['expires_at', 'jti']],
    ['audit_log', 'audit_log_at', 'audit_log_at_id', ['at', 'id']],
    [
      'webhook_deliveries',
      'webhook_deliveries_created',
      'webhook_deliveries_created_id',
      ['created_at', 'id'],
    ],
    [
      'device_setup_codes',
      'device_setup_codes_expires',
      'device_setup_codes_expires_id',
      ['expires_at', 'id'],
    ],
  ] as const) {
    await db.schema
      .createIndex(index)
      .on(table)
      .columns([...columns])
      .execute()
    await db.schema.dropIndex(old).execute()
  }
  // Only the tokens of claimed links, as before.
  await db.schema
    .createIndex('holder_link_tokens_claimed_hash')
    .on('holder_link_tokens')
    .columns(['claimed_at', 'token_hash'])
    .where(sql<boolean>`claimed_at is not null`)
    .execute()
  await db.schema.dropIndex('holder_link_tokens_claimed').execute()
}
