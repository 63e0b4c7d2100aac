import fs from 'node:fs'
import path from 'node:path'
import SqliteDatabase from 'better-sqlite3'
import { Kysely, type LogEvent, Migrator, PostgresDialect, SqliteDialect, sql } from 'kysely'
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

export interface OpenOptions {
  schema?: string
  /**
   * Called for each failed query and each lost idle connection; not for constraint violations,
   * which are answers (a duplicate e-mail) rather than faults. Feeds the error metric.
   */
  onError?: (err: unknown) => void
}

function isConstraintViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && (code.startsWith('23') || code.startsWith('SQLITE_CONSTRAINT'))
}

/** Opens the database named by a `sqlite:<path>` or `postgres://…` URL. */
export async function openDatabase(url: string, options: OpenOptions = {}): Promise<DatabaseHandle> {
  const dialect: Dialect = url.startsWith('sqlite:') ? 'sqlite' : 'postgres'
  const { onError } = options
  const log = onError
    ? (event: LogEvent) => {
        if (event.level === 'error' && !isConstraintViolation(event.error)) onError(event.error)
      }
    : undefined
  let db: Db
  const schema = options.schema ?? 'public'
  if (dialect === 'sqlite') {
    const file = url.slice('sqlite:'.length)
    if (file !== ':memory:') fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true })
    const sqlite = new SqliteDatabase(file)
    sqlite.pragma('journal_mode = WAL')
    sqlite.pragma('busy_timeout = 5000')
    sqlite.pragma('foreign_keys = ON')
    sqlite.pragma('synchronous = NORMAL')
    db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }), ...(log ? { log } : {}) })
  } else {
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
    pool.on('error', (err) => onError?.(err))
    // A connection lost while checked out (a query in flight) fails that query and then emits
    // 'error' on the client, where pg-pool listens only while it is idle: without this the process dies.
    pool.on('connect', (client) => client.on('error', () => {}))
    db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }), ...(log ? { log } : {}) })
    if (schema !== 'public') await sql`create schema if not exists ${sql.id(schema)}`.execute(db)
  }
  // The schema is named explicitly: Kysely looks for its migration tables across every schema it can
  // see, and would otherwise mistake another deployment's (or test run's) tables for ours.
  const migrator = new Migrator({
    db,
    provider: migrationProvider(dialect),
    ...(dialect === 'postgres' ? { migrationTableSchema: schema } : {}),
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
