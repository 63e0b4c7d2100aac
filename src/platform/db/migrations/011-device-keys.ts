import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Optional device keys (docs/specification.md): only the SHA-256 of a device's key is
 * stored, so a copy of the table cannot log a device in. Null: a key-less device, as the
 * specification designed them (unless DEVICE_KEYS_REQUIRED).
 */
export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  await db.schema.alterTable('devices').addColumn('key_hash', 'varchar(64)').execute()
}
