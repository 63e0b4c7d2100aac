import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Every instance reads the revocations written since its cursor (`revoked_at`) each
 * REVOCATION_POLL_MS; without an index that read would scan the whole blocklist every second.
 */
export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  await db.schema.createIndex('revoked_tokens_revoked_at').on('revoked_tokens').column('revoked_at').execute()
}
