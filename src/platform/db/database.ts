import fs from 'node:fs'
import path from 'node:path'
import SqliteDatabase from 'better-sqlite3'
import { Kysely, Migrator, PostgresDialect, SqliteDialect, sql } from 'kysely'
import pg from 'pg'
import { migrationProvider } from './migrations/index.js'
import type { Database } from './schema.js'

export type Dialect = 'sqlite' | 'postgres'
export type Db = Kysely<Database>

export interface DatabaseHandle {
  db: Db
  dialect: Dialect
  /** Applies pending migrations; safe to call from several instances at once (Kysely takes a lock). */
  migrate(): Promise<void>
  /** Names of migrations not yet applied. */
  pendingMigrations(): Promise<string[]>
  close(): Promise<void>
}

const INT8_OID = 20

/** Opens the database named by a `sqlite:<path>` or `postgres://…` URL. */
export async function openDatabase(url: string, options: { schema?: string } = {}): Promise<DatabaseHandle> {
  const dialect: Dialect = url.startsWith('sqlite:') ? 'sqlite' : 'postgres'
  let db: Db
  let schema: string | undefined
  if (dialect === 'sqlite') {
    const file = url.slice('sqlite:'.length)
    if (file !== ':memory:') fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true })
    const sqlite = new SqliteDatabase(file)
    sqlite.pragma('journal_mode = WAL')
    sqlite.pragma('busy_timeout = 5000')
    sqlite.pragma('foreign_keys = ON')
    sqlite.pragma('synchronous = NORMAL')
    db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) })
  } else {
    schema = options.schema ?? 'public'
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new Error(`invalid schema name: ${schema}`)
    const pool = new pg.Pool({
      connectionString: url,
      max: 10,
      connectionTimeoutMillis: 3000,
      idleTimeoutMillis: 30_000,
      // Epoch-millisecond columns and counts are bigint: read them as numbers (all stay below 2^53).
      types: {
        getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
          oid === INT8_OID
            ? (v: string) => Number(v)
            : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
      },
      options: `-c search_path=${schema}`,
    })
    // An idle client losing its connection (server restart) must not crash the process.
    pool.on('error', () => {})
    db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
    if (schema !== 'public') await sql`create schema if not exists ${sql.id(schema)}`.execute(db)
  }
  // Kysely looks for its migration tables in every schema unless told which one: another instance's
  // schema in the same database would pass for ours.
  const migrator = new Migrator({
    db,
    provider: migrationProvider(dialect),
    ...(schema ? { migrationTableSchema: schema } : {}),
  })
  return {
    db,
    dialect,
    async migrate() {
      const { error, results } = await migrator.migrateToLatest()
      if (error) {
        const failed = results?.find((r) => r.status === 'Error')
        throw new Error(`migration ${failed?.migrationName ?? ''} failed: ${(error as Error).message}`)
      }
    },
    async pendingMigrations() {
      const all = await migrator.getMigrations()
      return all.filter((m) => !m.executedAt).map((m) => m.name)
    },
    close: () => db.destroy(),
  }
}

/** Whether an error is a unique-constraint violation, on either dialect. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string }
  return (
    e?.code === '23505' ||
    e?.code === 'SQLITE_CONSTRAINT_UNIQUE' ||
    e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
  )
}
