import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Server-side sessions of the web dashboard. Only the SHA-256 of the cookie value is stored, so a
 * copy of the table cannot be replayed as a cookie. The CSRF token is tied to its session row.
 */
export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  await db.schema
    .createTable('dashboard_sessions')
    .addColumn('token_hash', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('subject_kind', 'varchar(32)', (c) => c.notNull())
    .addColumn('subject_id', 'integer', (c) => c.notNull())
    .addColumn('csrf_token', 'varchar(64)', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute()
  await db.schema
    .createIndex('dashboard_sessions_expires')
    .on('dashboard_sessions')
    .column('expires_at')
    .execute()
  await db.schema
    .createIndex('dashboard_sessions_subject')
    .on('dashboard_sessions')
    .columns(['subject_kind', 'subject_id'])
    .execute()
}
