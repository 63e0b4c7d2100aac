import type { CreateTableBuilder, Kysely, Migration, MigrationProvider } from 'kysely'
import type { Dialect } from '../database.js'
import * as m001 from './001-core.js'
import * as m002 from './002-api-keys.js'
import * as m003 from './003-jobs.js'
import * as m004 from './004-consumers.js'
import * as m005 from './005-partner.js'
import * as m007 from './007-admin-security.js'
import * as m008 from './008-dashboard-sessions.js'
import * as m009 from './009-reset-requests.js'
import * as m010 from './010-webhook-secret-sealed.js'
import * as m011 from './011-device-keys.js'
import * as m012 from './012-ticket-codes.js'
import * as m013 from './013-revocation-cursor.js'
import * as m014 from './014-gate.js'
import * as m015 from './015-partners.js'
import * as m019 from './019-scale.js'
import * as m020 from './020-passkeys.js'
import * as m021 from './021-idempotency-without-codes.js'
import * as m023 from './023-dashboard-user-partner.js'
import * as m024 from './024-unknown-code.js'
import * as m036 from './036-device-setup-codes.js'
import * as m040 from './040-filter-indexes.js'
import * as m041 from './041-revocation-load.js'
import * as m042 from './042-audit-cursor.js'
import * as m043 from './043-job-traceparent.js'
import * as m044 from './044-account-generations.js'
import * as m045 from './045-checkin-lists.js'
import * as m046 from './046-retention-keyset.js'

/** What a migration needs to know of the dialect; the rest of the schema is written once for both. */
export interface MigrationContext {
  dialect: Dialect
  /** Starts a table with an auto-incrementing integer primary key named id. */
  id<T extends string>(table: CreateTableBuilder<T, never>): CreateTableBuilder<T, 'id'>
}

type MigrationModule = { up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> }

/** Every migration in order. A new one is added at the end with the next number, never edited once landed. */
const migrations: [string, MigrationModule][] = [
  ['001-core', m001],
  ['002-api-keys', m002],
  ['003-jobs', m003],
  ['004-consumers', m004],
  ['005-partner', m005],
  // No 006: it never shipped. The admin-security branch numbered its migration 007 while 004-006 were
  // kept for branches in flight (consumers took 004, partner 005); no 006 file exists anywhere in the
  // history, so no database has a 006 row. Do not reuse the number.
  ['007-admin-security', m007],
  ['008-dashboard-sessions', m008],
  ['009-reset-requests', m009],
  ['010-webhook-secret-sealed', m010],
  ['011-device-keys', m011],
  ['012-ticket-codes', m012],
  ['013-revocation-cursor', m013],
  ['014-gate', m014],
  ['015-partners', m015],
  ['019-scale', m019],
  ['020-passkeys', m020],
  ['021-idempotency-without-codes', m021],
  ['023-dashboard-user-partner', m023],
  ['024-unknown-code', m024],
  ['036-device-setup-codes', m036],
  ['040-filter-indexes', m040],
  ['041-revocation-load', m041],
  ['042-audit-cursor', m042],
  ['043-job-traceparent', m043],
  ['044-account-generations', m044],
  ['045-checkin-lists', m045],
  ['046-retention-keyset', m046],
]

export function migrationNames(): string[] {
  return migrations.map(([name]) => name)
}

/**
 * The migrations of this release, plus `ahead`: migrations a newer release applied, given as no-ops
 * so that Kysely accepts the database (it refuses one holding a migration it was not given).
 */
export function migrationProvider(dialect: Dialect, ahead: string[] = []): MigrationProvider {
  const ctx: MigrationContext = {
    dialect,
    id: (table) =>
      dialect === 'postgres'
        ? table.addColumn('id', 'serial', (c) => c.primaryKey())
        : table.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement()),
  }
  return {
    async getMigrations() {
      const out: Record<string, Migration> = {}
      for (const [name, mod] of migrations) out[name] = { up: (db) => mod.up(db, ctx) }
      for (const name of ahead) out[name] ??= { up: async () => {} }
      return out
    },
  }
}
