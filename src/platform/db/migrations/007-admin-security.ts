import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/** Administrator MFA secrets (sealed) and password-reset tokens (hashed). */
export async function up(db: Kysely<unknown>, { id }: MigrationContext): Promise<void> {
  await db.schema
    .createTable('admin_mfa')
    .addColumn('admin_id', 'integer', (c) =>
      c.primaryKey().references('administrators.id').onDelete('cascade'),
    )
    .addColumn('active_secret', 'text')
    // The last time step accepted for the active secret: a code of that step or earlier is a replay.
    .addColumn('active_last_step', 'bigint')
    .addColumn('pending_secret', 'text')
    .addColumn('pending_created_at', 'bigint')
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute()

  await id(db.schema.createTable('password_reset_tokens'))
    .addColumn('admin_id', 'integer', (c) => c.notNull().references('administrators.id').onDelete('cascade'))
    .addColumn('token_hash', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('used_at', 'bigint')
    .execute()
  await db.schema
    .createIndex('password_reset_tokens_admin')
    .on('password_reset_tokens')
    .columns(['admin_id', 'created_at'])
    .execute()
}
