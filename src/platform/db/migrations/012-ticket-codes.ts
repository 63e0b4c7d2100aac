import { type Kysely, sql } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Signed ticket codes and the scanner sync feed. A transfer keeps its current code sealed (a code
 * admits its holder, so a copy of the table must not), a digest of it that scanners match against,
 * and the version of the code (a re-issue increments it and revokes the lower ones). `feed_seq` is the
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
  await db.schema.alterTable('transfers').addColumn('code_sealed', 'text').execute()
  await db.schema.alterTable('transfers').addColumn('code_digest', 'varchar(32)').execute()
  // Transfers made before this migration enter the feed in the order they were made.
  await sql`update transfers set feed_seq = id`.execute(db)
  await sql`update events set feed_seq = coalesce((select max(t.id) from transfers t where t.event_id = events.id), 0)`.execute(
    db,
  )
  await db.schema.createIndex('transfers_feed').on('transfers').columns(['event_id', 'feed_seq']).execute()
}
