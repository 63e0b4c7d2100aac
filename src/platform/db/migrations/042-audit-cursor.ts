import { type Kysely, sql } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * The audit log read forwards by a cursor that misses nothing (`GET /admin/audit?after=`, `wristband
 * audit --follow`, the sink of AUDIT_SINK_URL; docs/observability.md, "Audit export").
 *
 * - `audit_log.tx`: on PostgreSQL the inserting transaction's id (`pg_current_xact_id()`, 64-bit, never
 *   wraps), filled by the column's default so every writer, the previous release included, sets it.
 *   Ids come from a sequence when a row is inserted, not when it commits: a transaction that took id
 *   10 may commit after one that took 11, and a reader paging by id alone would have passed 10 by then.
 *   A forward page hands out only rows of transactions older than every transaction still open, in
 *   (tx, id) order, so a row that commits late is never behind a cursor already handed out. Rows
 *   written before this migration keep tx 0 (they are all committed). SQLite has one writer at a time,
 *   so ids are taken in commit order: tx stays 0 there.
 *   The default is set after the column is added, so adding it does not rewrite the table.
 * - `audit_sink`: per sink, the cursor its receiver acknowledged last and its failures in a row, so a
 *   restart sends on from there.
 *
 * Additions only: the previous release runs beside this one unchanged.
 */
export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  await db.schema
    .alterTable('audit_log')
    .addColumn('tx', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute()
  if (ctx.dialect === 'postgres')
    await sql`alter table audit_log alter column tx set default (pg_current_xact_id()::text::bigint)`.execute(
      db,
    )
  await db.schema.createIndex('audit_log_tx_id').on('audit_log').columns(['tx', 'id']).execute()
  await db.schema
    .createTable('audit_sink')
    .addColumn('name', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('after_tx', 'bigint', (c) => c.notNull())
    .addColumn('after_id', 'bigint', (c) => c.notNull())
    .addColumn('failures', 'integer', (c) => c.notNull())
    .addColumn('last_error', 'varchar(500)')
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute()
}
