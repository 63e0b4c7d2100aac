import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Consumers and devices: one-time phone codes, phone-ownership proofs, identity-provider links and
 * operator session tokens. Secrets are kept only as hashes (the session token also sealed, see
 * devices/operator-session.ts).
 */
export async function up(db: Kysely<unknown>, { id }: MigrationContext): Promise<void> {
  await id(db.schema.createTable('phone_codes'))
    .addColumn('purpose', 'varchar(16)', (c) => c.notNull())
    .addColumn('phone', 'varchar(32)', (c) => c.notNull())
    .addColumn('code_hash', 'varchar(64)', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('consumed_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute()
  await db.schema
    .createIndex('phone_codes_phone')
    .on('phone_codes')
    .columns(['phone', 'purpose', 'created_at'])
    .execute()

  await db.schema
    .createTable('phone_verifications')
    .addColumn('token_hash', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('phone', 'varchar(32)', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('used_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute()

  // Addresses given by the consumer (registration, profile edit) are not proven; records created
  // by an administrator are. Only proven addresses may be linked to an identity-provider login.
  await db.schema
    .alterTable('customers')
    .addColumn('email_self_asserted', 'integer', (c) => c.notNull().defaultTo(0))
    .execute()
  await db.schema.createIndex('customers_email').on('customers').column('email').execute()

  await id(db.schema.createTable('customer_identities'))
    .addColumn('customer_id', 'integer', (c) => c.notNull().references('customers.id').onDelete('cascade'))
    .addColumn('issuer', 'varchar(300)', (c) => c.notNull())
    .addColumn('subject', 'varchar(255)', (c) => c.notNull())
    .addColumn('email', 'varchar(254)')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_login_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('customer_identities_issuer_subject', ['issuer', 'subject'])
    .execute()
  await db.schema
    .createIndex('customer_identities_customer')
    .on('customer_identities')
    .column('customer_id')
    .execute()

  await db.schema
    .createTable('operator_sessions')
    .addColumn('user_id', 'integer', (c) => c.primaryKey().references('users.id').onDelete('cascade'))
    .addColumn('token_hash', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('token_sealed', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute()
}
