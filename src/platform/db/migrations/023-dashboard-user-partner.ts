import type { Kysely } from 'kysely'

/**
 * `dashboard_users.partner` (docs/specification.md: partners are isolated from each other): the
 * ticket partner a dashboard user answers for, by the name its API keys give (`partners.name`, in each
 * of the user's events). The deliveries page shows a dashboard user only that partner's receiver and
 * deliveries; null, as every existing user has, shows none until an administrator binds the user.
 *
 * A nullable column only: the release before keeps running beside this one (it neither reads nor
 * writes the column, so its instances still show every partner during a rolling upgrade).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('dashboard_users').addColumn('partner', 'varchar(200)').execute()
}
