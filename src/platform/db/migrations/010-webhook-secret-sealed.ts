import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Webhook signing secrets are stored sealed (src/webhooks/webhooks.store.ts), longer than the 100
 * characters the plain `whsec_…` form needed. SQLite does not enforce a varchar length. The plain rows
 * are sealed by the application on start: the key derives from the signing secret, which a migration
 * does not have.
 */
export async function up(db: Kysely<unknown>, { dialect }: MigrationContext): Promise<void> {
  if (dialect !== 'postgres') return
  await db.schema
    .alterTable('webhooks')
    .alterColumn('secret', (c) => c.setDataType('text'))
    .execute()
}
