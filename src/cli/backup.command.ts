import fs from 'node:fs'
import path from 'node:path'
import SqliteDatabase from 'better-sqlite3'
import { CliError, type Subcommand } from './command.js'

/**
 * `wristband backup FILE`: a consistent copy of the SQLite database while the service runs, through
 * SQLite's online backup API. Copying the file alone is not a backup: in WAL mode the latest writes
 * sit in `wristband.db-wal` until a checkpoint folds them in.
 */
export const backupCommand: Subcommand = {
  summary: 'Copy the SQLite database to FILE while the service runs',
  usage: `Usage: wristband backup FILE

Writes a consistent copy of the SQLite database (DATABASE_URL, default DATA_DIR/wristband.db) to FILE
with SQLite's online backup API; the service may keep running and writing meanwhile. FILE must not
exist yet. To restore, stop the service, put FILE in the place of the database (and remove any
wristband.db-wal and wristband.db-shm beside it), and start the service again.

Keep the signing secret (JWT_SECRET, or DATA_DIR/jwt-secret) with the backup: the MFA secrets in the
database are sealed with a key derived from it, and without it no administrator can pass MFA.

For PostgreSQL use pg_dump (see docs/operations.md).`,
  options: {},
  positionals: 1,
  async run(_values, loadConfig, [file]) {
    if (!file) throw new CliError('wristband backup: give the FILE to write (see --help)')
    const config = loadConfig()
    if (!config.databaseUrl.startsWith('sqlite:'))
      throw new CliError('wristband backup: the database is PostgreSQL; back it up with pg_dump', 2)
    const source = config.databaseUrl.slice('sqlite:'.length)
    if (source === ':memory:')
      throw new CliError('wristband backup: an in-memory database has nothing to keep', 2)
    if (fs.existsSync(file))
      throw new CliError(`wristband backup: ${file} exists already; give a new file`, 2)
    if (!fs.existsSync(source)) throw new CliError(`wristband backup: no database at ${source}`, 1)
    const db = new SqliteDatabase(source, { fileMustExist: true })
    try {
      // Waits for a writer of the running service rather than failing at once.
      db.pragma('busy_timeout = 5000')
      const { totalPages } = await db.backup(file)
      console.log(`backed up ${source} to ${path.resolve(file)} (${totalPages} pages)`)
    } catch (err) {
      fs.rmSync(file, { force: true })
      throw new CliError(`wristband backup: ${(err as Error).message}`, 1)
    } finally {
      db.close()
    }
    return 0
  },
}
