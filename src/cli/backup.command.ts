import fs from 'node:fs'
import path from 'node:path'
import SqliteDatabase from 'better-sqlite3'
import type { Config } from '../platform/config.js'
import { EXIT_STATUS } from '../platform/startup.js'
import { CliError, type Subcommand, stringOption } from './command.js'

/** The key files the service generates into DATA_DIR when their setting is unset. */
const GENERATED_KEYS = [
  { file: 'jwt-secret', setting: 'JWT_SECRET' },
  { file: 'edge-key.pem', setting: 'EDGE_SIGNING_KEY' },
] as const

/**
 * The keys a restored database needs, and where each comes from: the signing secret (tokens, sealed
 * MFA and webhook secrets) and the edge key (every ticket code). A restore without them signs
 * everyone out, locks every administrator out of MFA and changes every ticket code.
 */
function keysOf(config: Config): { setting: string; file: string | undefined }[] {
  return GENERATED_KEYS.map(({ file, setting }) => ({
    setting,
    file: config[setting] === undefined ? path.join(config.DATA_DIR, file) : undefined,
  }))
}

/** The folder a backup goes into exists and may be written, or one line says which it is not. */
function assertFolderTakesFile(dir: string): void {
  const refuse = (problem: string) => {
    throw new CliError(`wristband backup: the folder ${dir} ${problem}`, EXIT_STATUS.backupTarget)
  }
  try {
    if (!fs.statSync(dir).isDirectory()) refuse('is not a folder')
    fs.accessSync(dir, fs.constants.W_OK)
  } catch (err) {
    if (err instanceof CliError) throw err
    const code = (err as NodeJS.ErrnoException).code
    refuse(code === 'ENOENT' ? 'does not exist (create it first)' : `is not writable (${code})`)
  }
}

/**
 * `wristband backup FILE`: a consistent copy of the SQLite database while the service runs, through
 * SQLite's online backup API. Copying the file alone is not a backup: in WAL mode the latest writes
 * sit in `wristband.db-wal` until a checkpoint folds them in. The copy is created 0600, as the
 * database is: it holds password hashes and sealed secrets.
 */
export const backupCommand: Subcommand = {
  summary: 'Copy the SQLite database (and, with --keys, its generated keys) while the service runs',
  usage: `Usage: wristband backup FILE [--keys DIR]

Writes a consistent copy of the SQLite database (DATABASE_URL, default DATA_DIR/wristband.db) to FILE
with SQLite's online backup API; the service may keep running and writing meanwhile. FILE must not
exist yet; it is created readable by its owner only (0600). To restore, stop the service, put FILE in
the place of the database (and remove any wristband.db-wal and wristband.db-shm beside it), put the
keys back, and start the service again.

A database is only half a backup: keep the keys it was written with. The signing secret (JWT_SECRET,
or the generated DATA_DIR/jwt-secret) seals MFA and webhook secrets and signs every token; the edge key
(EDGE_SIGNING_KEY, or the generated DATA_DIR/edge-key.pem) signs every ticket code. Restored without
them, every administrator fails MFA, everyone is signed out, webhooks are signed with the wrong key
and every ticket code changes. Keys set in the environment are yours to keep (in your secret store);
generated ones are copied by --keys.

Options:
  --keys DIR           also copy the generated key files (jwt-secret, edge-key.pem) into DIR (0600);
                       keep DIR apart from FILE, e.g. in your secret store

For PostgreSQL use pg_dump (see docs/operations.md), and keep JWT_SECRET and EDGE_SIGNING_KEY.`,
  options: { keys: { type: 'string' } },
  positionals: 1,
  async run(values, loadConfig, [file]) {
    if (!file) throw new CliError('wristband backup: give the FILE to write (see --help)')
    const keysDir = stringOption(values, 'keys', 'backup', true)
    const config = loadConfig()
    if (!config.databaseUrl.startsWith('sqlite:'))
      throw new CliError('wristband backup: the database is PostgreSQL; back it up with pg_dump', 2)
    const source = config.databaseUrl.slice('sqlite:'.length)
    if (source === ':memory:')
      throw new CliError('wristband backup: an in-memory database has nothing to keep', 2)
    if (fs.existsSync(file))
      throw new CliError(`wristband backup: ${file} exists already; give a new file`, 2)
    assertFolderTakesFile(path.dirname(path.resolve(file)))
    if (!fs.existsSync(source)) throw new CliError(`wristband backup: no database at ${source}`, 1)
    const db = new SqliteDatabase(source, { fileMustExist: true })
    try {
      // Waits for a writer of the running service rather than failing at once.
      db.pragma('busy_timeout = 5000')
      // Created empty with the owner's permissions first: SQLite would create it world-readable.
      fs.closeSync(fs.openSync(file, 'wx', 0o600))
      const { totalPages } = await db.backup(file)
      console.log(`backed up ${source} to ${path.resolve(file)} (${totalPages} pages)`)
    } catch (err) {
      fs.rmSync(file, { force: true })
      throw new CliError(`wristband backup: ${(err as Error).message}`, 1)
    } finally {
      db.close()
    }
    const keys = keysOf(config)
    if (keysDir !== undefined) {
      fs.mkdirSync(keysDir, { recursive: true, mode: 0o700 })
      for (const key of keys) {
        if (key.file === undefined || !fs.existsSync(key.file)) continue
        const copy = path.join(keysDir, path.basename(key.file))
        fs.copyFileSync(key.file, copy, fs.constants.COPYFILE_EXCL)
        fs.chmodSync(copy, 0o600)
        console.log(`copied ${key.file} to ${path.resolve(copy)}`)
      }
    }
    const fromEnvironment = keys.filter((k) => k.file === undefined).map((k) => k.setting)
    const generated = keys.filter((k) => k.file !== undefined).map((k) => k.file)
    if (fromEnvironment.length > 0)
      console.log(`keep ${fromEnvironment.join(' and ')} (set in the environment) with this backup`)
    if (keysDir === undefined && generated.length > 0)
      console.log(`keep ${generated.join(' and ')} with this backup (or run with --keys DIR)`)
    return 0
  },
}
