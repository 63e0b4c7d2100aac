import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Durable background jobs (mail, grouped transfer e-mails, webhook deliveries). A job is written in
 * the same transaction as the change that causes it, so nothing acknowledged is lost.
 */
export async function up(db: Kysely<unknown>, { id }: MigrationContext): Promise<void> {
  await id(db.schema.createTable('jobs'))
    .addColumn('kind', 'varchar(64)', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    // Jobs with the same key are one job: a second enqueue while the first is pending is absorbed.
    .addColumn('dedupe_key', 'varchar(200)', (c) => c.unique())
    .addColumn('run_at', 'bigint', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('locked_until', 'bigint')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('done_at', 'bigint')
    .addColumn('failed_at', 'bigint')
    .execute()
  await db.schema.createIndex('jobs_due').on('jobs').columns(['done_at', 'failed_at', 'run_at']).execute()
}
