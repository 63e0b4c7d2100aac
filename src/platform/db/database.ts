import fs from 'node:fs'
import path from 'node:path'
import SqliteDatabase from 'better-sqlite3'
import {
  CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type DialectAdapter,
  type Driver,
  Kysely,
  type LogEvent,
  Migrator,
  PostgresAdapter,
  PostgresDialect,
  SqliteDialect,
  type SqliteDialectConfig,
  SqliteDriver,
  sql,
} from 'kysely'
import pg from 'pg'
import type { Config } from '../config.js'
import { databaseUnavailable, shownUrl } from '../startup.js'
import { recordFinishedSpan } from '../tracing.js'
import { migrationNames, migrationProvider } from './migrations/index.js'
import type { Database } from './schema.js'

export type Dialect = 'sqlite' | 'postgres'
export type Db = Kysely<Database>

export interface DatabaseHandle {
  db: Db
  dialect: Dialect
  /**
   * Applies pending migrations; safe to call from several instances at once (Kysely takes a lock).
   * Resolves with the migrations the database holds that this release does not know (`ahead`): a
   * newer release ran them, and this one runs on beside them (each migration stays compatible with
   * the release before it).
   */
  migrate(): Promise<{ ahead: string[]; applied: string[] }>
  /** The database as a log line may name it: the SQLite file, or the URL without its password. */
  name: string
  /** One round trip to the database (`select 1`), for the readiness check. */
  ping(): Promise<void>
  /**
   * Whether writes would be refused without trying one: a SQLite file (or its folder) this process
   * may not write, a PostgreSQL session that is read-only (a replica, `default_transaction_read_only`).
   */
  readOnly(): Promise<boolean>
  /** Names of migrations not yet applied. */
  pendingMigrations(): Promise<string[]>
  /** Every migration known here or applied to the database, in order, with when it was applied. */
  migrationStatus(): Promise<MigrationState[]>
  close(): Promise<void>
}

export interface MigrationState {
  name: string
  /** When it was applied; undefined while pending. */
  appliedAt: Date | undefined
  /** Applied by a newer release: this release has no such migration. */
  unknown: boolean
}

const INT8_OID = 20

export interface OpenOptions {
  schema?: string
  /** PostgreSQL only: connections of this process's pool (default 10). */
  poolSize?: number
  /** PostgreSQL only: how long to wait for a new connection, in milliseconds (default 3000). */
  connectTimeoutMs?: number
  /** PostgreSQL only: statements running longer are cancelled by the server; 0 means no limit. */
  statementTimeoutMs?: number
  /**
   * Called for each failed query and each lost idle connection; not for constraint violations,
   * which are answers (a duplicate e-mail) rather than faults. Feeds the error metric.
   */
  onError?: (err: unknown) => void
  /**
   * SQLite only: each statement run inside a traced request becomes a span (`sqlite.query`); PostgreSQL's
   * come from its OpenTelemetry instrumentation.
   */
  traced?: boolean
}

function isConstraintViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && (code.startsWith('23') || code.startsWith('SQLITE_CONSTRAINT'))
}

/**
 * `create schema if not exists` does not hold against itself: two processes creating the same new schema
 * at the same moment (two instances starting on a fresh schema, `wristband migrate` beside a starting
 * server) both find it missing, and the later one fails on pg_namespace's unique index (23505) or with
 * 42P06. Either way the schema exists, which is all that was asked.
 */
async function ensureSchema(db: Db, schema: string): Promise<void> {
  try {
    await sql`create schema if not exists ${sql.id(schema)}`.execute(db)
  } catch (err) {
    const code = (err as { code?: unknown }).code
    if (code !== '23505' && code !== '42P06') throw err
  }
}

/**
 * Every query must land in DATABASE_SCHEMA. The service asks for it as a connection parameter
 * (`-c search_path=…`), which a pooler in transaction mode drops (PgBouncer accepts it only as an
 * ignored startup parameter): the tables would then be created and read in the role's default schema,
 * perhaps beside another deployment's. Refused at start instead, naming the fix.
 */
async function checkSchema(db: Db, schema: string): Promise<void> {
  const r = await sql<{ schema: string | null }>`select current_schema() as schema`.execute(db)
  const current = r.rows[0]?.schema ?? null
  if (current !== schema)
    throw new Error(
      `queries would land in schema ${current ?? '(none)'}, not DATABASE_SCHEMA ${schema}: the search_path the service sets was not applied (a pooler such as PgBouncer drops it; set it on the pooler's database entry, connect_query='SET search_path = ${schema}', or on the role: ALTER ROLE … SET search_path = ${schema}; docs/operations.md, "PgBouncer")`,
    )
}

/** Kysely's own key, so that a release still on Kysely's lock and this one exclude each other. */
const MIGRATION_LOCK_ID = 3853314791062309107n

/**
 * The migrations' lock held by their transaction. Kysely's PostgreSQL lock is a session-level advisory
 * lock taken and released in statements of their own, before and after the migrations' transaction.
 * Behind a pooler in transaction mode (PgBouncer) each of those may run on another server connection:
 * the unlock then misses, the lock stays with one of the pooler's connections, and every later
 * migration (each instance's start) waits for it, up to an hour. Here `begin` is sent first on the
 * migration's connection and the lock taken in that transaction, which the transaction Kysely opens next
 * on the same connection continues (PostgreSQL notes the second `begin` and carries on): lock,
 * migrations and commit run on one server connection, and the lock ends with the transaction.
 */
class TransactionLockAdapter extends PostgresAdapter {
  override async acquireMigrationLock(db: Kysely<unknown>): Promise<void> {
    await sql`begin`.execute(db)
    try {
      await sql`select pg_advisory_xact_lock(${sql.lit(MIGRATION_LOCK_ID)})`.execute(db)
    } catch (err) {
      await sql`rollback`.execute(db)
      throw err
    }
  }

  override async releaseMigrationLock(): Promise<void> {
    // Released by the transaction's commit or rollback.
  }
}

class PooledPostgresDialect extends PostgresDialect {
  override createAdapter(): DialectAdapter {
    return new TransactionLockAdapter()
  }
}

/**
 * SQLite transactions take the write lock when they begin (`begin immediate`), waiting for it up to
 * `busy_timeout`. A deferred `begin` reads first and asks for the lock at its first write: when another
 * process (an instance, the command line) wrote in between, SQLite cannot wait and refuses at once with
 * "database is locked" (the command line's `admin disable` beside two serving instances did).
 */
class ImmediateSqliteDialect extends SqliteDialect {
  readonly #config: SqliteDialectConfig
  constructor(config: SqliteDialectConfig) {
    super(config)
    this.#config = config
  }
  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.#config)
  }
}

class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'))
  }
}

/** `wristband migrate --status`: one line per migration, oldest first. */
export function formatMigrationStatus(states: MigrationState[]): string {
  return states
    .map((m) => {
      const when = m.appliedAt ? `applied ${m.appliedAt.toISOString()}` : 'pending'
      const note = m.unknown ? '  (applied by a newer release; unknown to this one)' : ''
      return `${when.padEnd(32)} ${m.name}${note}`
    })
    .join('\n')
}

/** The pool settings of the service itself (commands and migrations run without a statement limit). */
export function servicePoolOptions(config: Config): OpenOptions {
  return {
    schema: config.DATABASE_SCHEMA,
    poolSize: config.DATABASE_POOL_SIZE,
    connectTimeoutMs: config.DATABASE_CONNECT_TIMEOUT_SECONDS * 1000,
    statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_SECONDS * 1000,
    traced: config.tracing,
  }
}

/** Opens the database named by a `sqlite:<path>` or `postgres://…` URL. */
export async function openDatabase(url: string, options: OpenOptions = {}): Promise<DatabaseHandle> {
  const dialect: Dialect = url.startsWith('sqlite:') ? 'sqlite' : 'postgres'
  const { onError } = options
  const traceQueries = options.traced === true && dialect === 'sqlite'
  const log =
    onError || traceQueries
      ? (event: LogEvent) => {
          if (event.level === 'error' && onError && !isConstraintViolation(event.error)) onError(event.error)
          if (traceQueries)
            recordFinishedSpan(
              'sqlite.query',
              { 'db.system.name': 'sqlite', 'db.query.text': event.query.sql },
              event.queryDurationMillis,
            )
        }
      : undefined
  let db: Db
  const schema = options.schema ?? 'public'
  let migrationDb: Db
  let name = shownUrl(url)
  let readOnly: () => Promise<boolean>
  if (dialect === 'sqlite') {
    const file = url.slice('sqlite:'.length)
    if (file !== ':memory:') name = path.resolve(file)
    if (file !== ':memory:') {
      fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true, mode: 0o700 })
      // Created readable by its owner only: it holds password hashes and sealed secrets. SQLite gives
      // its -wal and -shm files the mode of the database file.
      fs.closeSync(fs.openSync(file, 'a', 0o600))
    }
    const sqlite = new SqliteDatabase(file)
    sqlite.pragma('journal_mode = WAL')
    sqlite.pragma('busy_timeout = 5000')
    sqlite.pragma('foreign_keys = ON')
    sqlite.pragma('synchronous = NORMAL')
    db = new Kysely<Database>({
      dialect: new ImmediateSqliteDialect({ database: sqlite }),
      ...(log ? { log } : {}),
    })
    migrationDb = db
    readOnly = async () => {
      if (file === ':memory:') return false
      try {
        // The file, and its folder for the WAL and journal files SQLite creates beside it.
        await fs.promises.access(name, fs.constants.W_OK)
        await fs.promises.access(path.dirname(name), fs.constants.W_OK)
        return false
      } catch {
        return true
      }
    }
  } else {
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new Error(`invalid schema name: ${schema}`)
    const pool = new pg.Pool({
      connectionString: url,
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 3000,
      ...(options.statementTimeoutMs ? { statement_timeout: options.statementTimeoutMs } : {}),
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
    // A client losing its connection (server restart, network cut) must not crash the process: idle
    // ones report to the pool, and one checked out would emit an unhandled 'error' while its query is
    // already rejected (and answered 503).
    pool.on('error', (err) => onError?.(err))
    pool.on('connect', (client) => client.on('error', () => {}))
    db = new Kysely<Database>({ dialect: new PooledPostgresDialect({ pool }), ...(log ? { log } : {}) })
    try {
      if (schema !== 'public') await ensureSchema(db, schema)
      await checkSchema(db, schema)
    } catch (err) {
      await db.destroy()
      throw databaseUnavailable(url, err)
    }
    migrationDb = seeingOnly(db, schema)
    readOnly = async () => {
      const r = await sql<{ transaction_read_only: string }>`show transaction_read_only`.execute(db)
      return r.rows[0]?.transaction_read_only === 'on'
    }
  }
  const migratorFor = (ahead: string[]) =>
    new Migrator({ db: migrationDb, provider: migrationProvider(dialect, ahead) })
  /** Migrations the database records as applied, oldest first ([] before the first migration). */
  const applied = async (): Promise<{ name: string; timestamp: string }[]> => {
    try {
      const r = await sql<{
        name: string
        timestamp: string
      }>`select name, timestamp from kysely_migration order by name`.execute(migrationDb)
      return r.rows
    } catch {
      return []
    }
  }
  const known = new Set(migrationNames())
  const appliedButUnknown = async () =>
    (await applied()).map((m) => m.name).filter((name) => !known.has(name))
  return {
    db,
    dialect,
    name,
    readOnly,
    async migrate() {
      // Kysely refuses to migrate ("corrupted migrations") a database holding a migration it was not
      // given, which is what a rollback to the previous release meets. Those migrations are handed to
      // it as applied no-ops, so it checks the order of the rest and applies only what is missing.
      // Kysely takes no migration lock on SQLite: a second process migrating the same file at the same
      // moment (`wristband migrate` beside a starting server) fails on a table the first one has just
      // created. Its transaction rolled back, so trying again applies only what is still pending. A
      // newer release migrating between our look-up and our run is met the same way.
      for (let attempt = 1; ; attempt++) {
        const ahead = await appliedButUnknown()
        const { error, results } = await migratorFor(ahead).migrateToLatest()
        if (!error)
          return {
            ahead,
            applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName),
          }
        const corrupted = /corrupted migrations/.test((error as Error).message)
        if (attempt < 5 && (dialect === 'sqlite' || /is missing/.test((error as Error).message))) {
          await new Promise((r) => setTimeout(r, 100 * attempt))
          continue
        }
        if (corrupted)
          throw new Error(
            `the database holds migrations (${ahead.join(', ')}) of a newer release that lack one this release needs: ${(error as Error).message}`,
          )
        const failed = results?.find((r) => r.status === 'Error')
        // No failed migration: the database could not be reached at all (its error says why).
        if (!failed) throw databaseUnavailable(url, error)
        throw new Error(`migration ${failed.migrationName} failed: ${(error as Error).message}`)
      }
    },
    async ping() {
      await sql`select 1`.execute(db)
    },
    async pendingMigrations() {
      const all = await migratorFor([]).getMigrations()
      return all.filter((m) => !m.executedAt).map((m) => m.name)
    },
    async migrationStatus() {
      const done = new Map((await applied()).map((m) => [m.name, new Date(m.timestamp)]))
      return [...new Set([...known, ...done.keys()])].sort().map((name) => ({
        name,
        appliedAt: done.get(name),
        unknown: !known.has(name),
      }))
    },
    close: () => db.destroy(),
  }
}

/**
 * The database as Kysely's Migrator should see it on PostgreSQL: only our schema. Its own look-up of
 * the migration tables introspects every schema of the database, which finds another deployment's
 * tables (and then skips creating ours) and fails outright when another schema is dropped meanwhile.
 */
function seeingOnly(db: Db, schema: string): Db {
  const introspection: DatabaseIntrospector = {
    async getSchemas() {
      const r = await sql<{
        name: string
      }>`select nspname as name from pg_namespace where nspname = ${schema}`.execute(db)
      return r.rows
    },
    async getTables() {
      const r = await sql<{ name: string }>`
        select table_name as name from information_schema.tables where table_schema = ${schema}`.execute(db)
      return r.rows.map((t) => ({ name: t.name, schema, isView: false, columns: [] }))
    },
    async getMetadata() {
      return { tables: await this.getTables() }
    },
  }
  // Kysely keeps its state in private fields, so every other member is read from (and bound to) db.
  return new Proxy(db, {
    get(target, prop) {
      if (prop === 'introspection') return introspection
      const value = Reflect.get(target, prop, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
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

/**
 * Create-or-update by a natural key (seed files): updates the `found` row, or inserts one; returns the
 * row's id. Run it in a transaction; two at once with the same key are not expected (seeding is one
 * operator's command).
 */
export async function upsertById(
  found: { id: number } | undefined,
  insert: () => Promise<{ id: number }>,
  update: (id: number) => Promise<unknown>,
): Promise<number> {
  if (!found) return (await insert()).id
  await update(found.id)
  return found.id
}
