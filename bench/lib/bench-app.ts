import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { sql } from 'kysely'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/platform/config.js'
import { type DatabaseHandle, openDatabase } from '../../src/platform/db/database.js'

/** The service's app in the bench's process, on a database of its own, and a connection to it. */
export interface BenchApp {
  app: Awaited<ReturnType<typeof buildApp>>
  /** A second connection: the app's own is not exposed. */
  database: DatabaseHandle
  /** Closes both, drops the PostgreSQL schema and deletes the data folder. */
  close(): Promise<void>
}

/**
 * An app on a SQLite file in a temporary folder, or on a schema of its own in BENCH_DATABASE_URL
 * (`<name>_bench_<random>`), signing with `secret`.
 */
export async function openBenchApp(name: string, secret: string): Promise<BenchApp> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `wristband-${name}-bench-`))
  const dbUrl = process.env.BENCH_DATABASE_URL
  const schema = `${name}_bench_${randomBytes(4).toString('hex')}`
  const config = loadConfig({
    JWT_SECRET: secret,
    DATA_DIR: dir,
    LOG_LEVEL: 'warn',
    ...(dbUrl ? { DATABASE_URL: dbUrl, DATABASE_SCHEMA: schema } : {}),
  })
  const app = await buildApp(config)
  const database = await openDatabase(config.databaseUrl, { schema: config.DATABASE_SCHEMA })
  return {
    app,
    database,
    async close() {
      await app.close()
      if (database.dialect === 'postgres') await sql.raw(`drop schema ${schema} cascade`).execute(database.db)
      await database.close()
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}
