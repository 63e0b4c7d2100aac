import { sql } from 'kysely'
import type { DatabaseHandle } from '../../src/platform/db/database.js'

/**
 * Every row of every table of the instance's database (its own PostgreSQL schema or SQLite file),
 * as one JSON text per table: what a reader of a backup, a replica or read-only SQL would see.
 */
export async function dumpDatabase(handle: DatabaseHandle): Promise<Map<string, string>> {
  const { db, dialect } = handle
  const tables =
    dialect === 'postgres'
      ? await sql<{ name: string }>`
          select table_name as name from information_schema.tables
          where table_schema = current_schema() and table_type = 'BASE TABLE'`.execute(db)
      : await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(db)
  const dump = new Map<string, string>()
  for (const { name } of tables.rows) {
    const rows = await sql<Record<string, unknown>>`select * from ${sql.table(name)}`.execute(db)
    dump.set(
      name,
      JSON.stringify(rows.rows, (_k, v) => (typeof v === 'bigint' ? String(v) : v)),
    )
  }
  return dump
}

/** The tables in whose rows `secret` appears (as is, or percent-encoded, or base64-encoded). */
export async function tablesHolding(handle: DatabaseHandle, secret: string): Promise<string[]> {
  const forms = [secret, encodeURIComponent(secret), Buffer.from(secret).toString('base64')]
  const dump = await dumpDatabase(handle)
  return [...dump].filter(([, text]) => forms.some((f) => text.includes(f))).map(([name]) => name)
}
