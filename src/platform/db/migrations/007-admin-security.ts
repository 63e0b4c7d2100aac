import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Administrator MFA secrets (sealed), the MFA time of refresh-token families, and password-reset
 * tokens (hashed). The MFA columns live on the
 * administrator row with an `mfa_` prefix and are nullable, so `wristband admin reset-mfa` clears them all.
 */
export async function up(db: Kysely<unknown>, { id }: MigrationContext): Promise<void> {
  // One column per statement: SQLite adds a single column per ALTER TABLE.
  for (const [name, type] of [
    ['mfa_secret', 'text'],
    // The last time step accepted for the active secret: a code of that step or earlier is a replay.
    ['mfa_last_step', 'bigint'],
    ['mfa_pending_secret', 'text'],
    ['mfa_pending_at', 'bigint'],
  ] as const) {
    await db.schema.alterTable('administrators').addColumn(name, type).execute()
  }

  // When the family's MFA verification happened, so a rotated access token still carries it.
  await db.schema.alterTable('refresh_tokens').addColumn('mfa_verified_at', 'bigint').execute()

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
