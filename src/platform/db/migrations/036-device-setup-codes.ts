import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * `device_setup_codes`: one-time codes an administrator creates for a registered device and shows as a
 * QR code; the scanner exchanges one once for its credentials (POST /devices/setup). Only the code's
 * SHA-256 is kept, so a reader of the database cannot use one. `used_at` is set by the one exchange that
 * wins; `expires_at` ends a code that was never used. A new table only: the release before keeps running
 * beside this one.
 */
export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  await ctx
    .id(db.schema.createTable('device_setup_codes'))
    .addColumn('device_id', 'integer', (c) => c.notNull().references('devices.id'))
    .addColumn('code_hash', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('created_by', 'varchar(100)', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('used_at', 'bigint')
    .execute()
  await db.schema
    .createIndex('device_setup_codes_device')
    .on('device_setup_codes')
    .column('device_id')
    .execute()
  await db.schema
    .createIndex('device_setup_codes_expires')
    .on('device_setup_codes')
    .column('expires_at')
    .execute()
}
