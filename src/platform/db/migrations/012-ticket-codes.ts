import { type Kysely, sql } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Signed ticket codes and the scanner sync feed. A transfer keeps the signed part of its current code
 * (`header.payload`, public) but not the signature, which the edge key gives again on each read (Ed25519
 * is deterministic): a copy of the table admits nobody. Also a digest of the code that scanners match
 * against, and the version of the code (a re-issue increments it and revokes the lower ones). `feed_seq` is the
 * transfer's position in its event's sync feed, taken from `events.feed_seq` in the same transaction as
 * the change, so the feed's order is the order in which changes committed.
 */
export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  await db.schema
    .alterTable('events')
    .addColumn('feed_seq', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute()
  for (const [name, type, def] of [
    ['code_version', 'integer', 1],
    ['feed_seq', 'bigint', 0],
  ] as const)
    await db.schema
      .alterTable('transfers')
      .addColumn(name, type, (c) => c.notNull().defaultTo(def))
      .execute()
  await db.schema.alterTable('transfers').addColumn('code_body', 'text').execute()
  await db.schema.alterTable('transfers').addColumn('code_digest', 'varchar(32)').execute()
  // Transfers made before this migration enter the feed in the order they were made.
  await sql`update transfers set feed_seq = id`.execute(db)
  await sql`update events set feed_seq = coalesce((select max(t.id) from transfers t where t.event_id = events.id), 0)`.execute(
    db,
  )
  await db.schema.createIndex('transfers_feed').on('transfers').columns(['event_id', 'feed_seq']).execute()
}
