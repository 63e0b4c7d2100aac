import type { Kysely } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * `token_generation` on every account that tokens are minted for (administrators, network managers,
 * operators, consumers), 0 for the accounts of today: a token carries the generation its account had
 * when it was minted (`account_gen`), and disabling the account, an administrator's password reset, an
 * MFA reset or `wristband admin end-tokens` start the next one, which ends every token minted before
 * (docs/security.md, "Token generations"). Tokens minted before this migration carry none: generation
 * 0. A column with a default only: the release before keeps running beside this one (its tokens carry
 * no generation and are ended like the others).
 */
export async function up(db: Kysely<unknown>, _ctx: MigrationContext): Promise<void> {
  for (const table of ['administrators', 'network_managers', 'users', 'customers'])
    await db.schema
      .alterTable(table)
      .addColumn('token_generation', 'integer', (c) => c.notNull().defaultTo(0))
      .execute()
}
