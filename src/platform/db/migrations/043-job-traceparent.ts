import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * `jobs.traceparent`: the W3C trace context of the traced request that queued a job, so the job's work
 * (a webhook delivery, a mail) continues the request's trace when tracing is on (docs/observability.md).
 * Null when tracing is off. A nullable column only: the previous release runs beside this one.
 */
export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  await db.schema.alterTable('jobs').addColumn('traceparent', 'varchar(64)').execute()
}
