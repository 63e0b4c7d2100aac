import { type Kysely, sql } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Indexes for the filters that slowed down at a million rows, and for retention. The previous release
 * runs beside this one unchanged (it never reads the new column; its queries may use the indexes).
 *
 * - The audit log's pages filtered by `kind`, `actor` or `outcome` read newest first by `id`: one index
 *   each on (filter, id), so a page is a walk down one index instead of sorting every matching row
 *   (the (kind, at) and (actor, at) indexes of 001 do not give the `id` order).
 * - A partner's deliveries filtered by `status`, newest first: (partner_id, status, id).
 * - Claim-link tokens carry their link's claim time (`claimed_at`, filled here for links claimed
 *   already) under a partial index of claimed tokens only: retention deletes from it without walking
 *   old unclaimed tokens (the pass with nothing due read them all). `link_id` is indexed for the claim,
 *   which sets it. A token of a link the previous release claims while both run keeps `claimed_at`
 *   null, so this release's retention keeps it (a SHA-256, whose link shows no code once claimed).
 */
export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  for (const column of ['kind', 'actor', 'outcome'])
    await db.schema.createIndex(`audit_log_${column}_id`).on('audit_log').columns([column, 'id']).execute()
  await db.schema
    .createIndex('webhook_deliveries_partner_status')
    .on('webhook_deliveries')
    .columns(['partner_id', 'status', 'id'])
    .execute()
  await db.schema.alterTable('holder_link_tokens').addColumn('claimed_at', 'bigint').execute()
  await db.schema.createIndex('holder_link_tokens_link').on('holder_link_tokens').column('link_id').execute()
  await sql`update holder_link_tokens set claimed_at = (
      select claimed_at from holder_links where holder_links.id = holder_link_tokens.link_id
    ) where link_id in (select id from holder_links where claimed_at is not null)`.execute(db)
  await db.schema
    .createIndex('holder_link_tokens_claimed')
    .on('holder_link_tokens')
    .column('claimed_at')
    .where(sql<boolean>`claimed_at is not null`)
    .execute()
}
