import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Passkeys. Only additions, so the release before keeps running beside this one.
 *
 * - `passkeys`: WebAuthn credentials of administrators, dashboard users and network managers. The
 *   credential id and public key are what the authenticator gave at registration (base64url, the
 *   public key in its COSE form); `counter` is the signature counter last seen, which may only grow
 *   (a cloned authenticator shows an older one).
 * - `webauthn_challenges`: a challenge waiting for its answer. Only hashes are kept: the SHA-256 of the
 *   flow token the asking session holds (a cookie or the options answer's `flow`) and of the challenge.
 *   A row is deleted when it is answered, right or wrong, so each challenge is good for one try.
 * - `dashboard_sessions.mfa_verified_at`: when the session's second factor (a TOTP code or a passkey)
 *   was given; null for a session opened with a password alone.
 */
export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  await ctx
    .id(db.schema.createTable('passkeys'))
    .addColumn('subject_kind', 'varchar(32)', (c) => c.notNull())
    .addColumn('subject_id', 'integer', (c) => c.notNull())
    .addColumn('credential_id', 'varchar(1400)', (c) => c.notNull().unique())
    .addColumn('public_key', 'text', (c) => c.notNull())
    .addColumn('counter', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('transports', 'varchar(200)', (c) => c.notNull().defaultTo(''))
    .addColumn('name', 'varchar(100)', (c) => c.notNull())
    .addColumn('aaguid', 'varchar(36)', (c) => c.notNull())
    .addColumn('backed_up', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_used_at', 'bigint')
    .execute()
  await db.schema
    .createIndex('passkeys_subject')
    .on('passkeys')
    .columns(['subject_kind', 'subject_id'])
    .execute()
  await db.schema
    .createTable('webauthn_challenges')
    .addColumn('flow_hash', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('challenge_hash', 'varchar(64)', (c) => c.notNull())
    .addColumn('purpose', 'varchar(16)', (c) => c.notNull())
    .addColumn('subject_kind', 'varchar(32)')
    .addColumn('subject_id', 'integer')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute()
  await db.schema
    .createIndex('webauthn_challenges_expires')
    .on('webauthn_challenges')
    .column('expires_at')
    .execute()
  await db.schema.alterTable('dashboard_sessions').addColumn('mfa_verified_at', 'bigint').execute()
}
