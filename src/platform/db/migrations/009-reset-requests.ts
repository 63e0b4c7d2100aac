import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * The hourly quota of password-reset requests, per submitted address whether an administrator has it
 * or not, so a 429 does not tell a known address from an unknown one. The address is kept as its
 * SHA-256; `times` is the JSON list of the request times (epoch ms) of the last hour. The row is also
 * what concurrent requests for one address lock, so they count one after another.
 */
export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  await db.schema
    .createTable('password_reset_requests')
    .addColumn('address_hash', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('times', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute()
  await db.schema
    .createIndex('password_reset_requests_updated')
    .on('password_reset_requests')
    .column('updated_at')
    .execute()
}
