import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/** Event clients: partner API keys, stored only as SHA-256 hashes. */
export async function up(db: Kysely<unknown>, { id }: MigrationContext): Promise<void> {
  await id(db.schema.createTable('event_clients'))
    .addColumn('event_id', 'integer', (c) => c.notNull().references('events.id'))
    .addColumn('name', 'varchar(100)', (c) => c.notNull())
    .addColumn('scopes', 'text', (c) => c.notNull())
    .addColumn('token_hash', 'varchar(64)', (c) => c.unique())
    .addColumn('key_prefix', 'varchar(16)', (c) => c.notNull())
    .addColumn('created_by', 'varchar(100)')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_used_at', 'bigint')
    .addColumn('revoked_at', 'bigint')
    .execute()
  await db.schema.createIndex('event_clients_event').on('event_clients').column('event_id').execute()
}
