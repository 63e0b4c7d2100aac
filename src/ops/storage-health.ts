import fs from 'node:fs/promises'
import path from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import type { Clock } from '../platform/clock.js'
import { EXIT_STATUS, StartupError } from '../platform/startup.js'
import { type StorageProblem, storageProblem } from '../platform/storage.js'

/** How long a failed write keeps readiness at 503 without a further failure (disk full on PostgreSQL). */
const FAILURE_HOLD_MS = 15_000

export interface StorageHealthDeps {
  clock: Clock
  log: FastifyBaseLogger
  /** What to name in the log line: the SQLite file, or the PostgreSQL URL without its password. */
  databaseName: string
  dataDir: string
}

/**
 * Whether this instance can write where it must: the database and DATA_DIR (generated keys, the
 * outbox). A failed write is reported here (by the database client and the error handler) and keeps
 * readiness at 503 for a while; readiness also probes both on each call. An outage is logged once,
 * naming the path, when it starts, and once when it ends: never once per request.
 */
export class StorageHealth {
  private failure: { problem: StorageProblem; path: string; at: number } | undefined
  /** Paths whose outage was announced and has not ended. */
  private readonly announced = new Set<string>()

  constructor(private readonly deps: StorageHealthDeps) {}

  get dataDir(): string {
    return this.deps.dataDir
  }

  /** Records `err` when it is a storage failure of the database; returns whether it was one. */
  reportDatabase(err: unknown): boolean {
    return this.report(err, this.deps.databaseName)
  }

  report(err: unknown, where: string): boolean {
    const problem = storageProblem(err)
    if (!problem) return false
    this.failure = { problem, path: where, at: this.deps.clock.now() }
    this.announce(problem, where, (err as { code?: string }).code)
    return true
  }

  /** A failure reported in the last few seconds, if any. */
  recent(): { problem: StorageProblem; path: string } | undefined {
    const f = this.failure
    if (f && this.deps.clock.now() - f.at < FAILURE_HOLD_MS) return f
    return undefined
  }

  /**
   * Writes and removes a small file in DATA_DIR: a full disk, a read-only mount or a folder the
   * service may not write fail here before any user's request does.
   */
  async probeDataDir(): Promise<StorageProblem | undefined> {
    const file = path.join(this.deps.dataDir, `.ready-probe-${process.pid}`)
    try {
      await fs.writeFile(file, 'ok\n', { mode: 0o600 })
      await fs.rm(file, { force: true })
      return undefined
    } catch (err) {
      await fs.rm(file, { force: true }).catch(() => {})
      const problem = storageProblem(err) ?? 'not_writable'
      this.announce(problem, this.deps.dataDir, (err as { code?: string }).code)
      return problem
    }
  }

  /** Called when every check passed: ends an announced outage with one line. */
  healthy(): void {
    if (this.announced.size === 0 || this.recent()) return
    for (const where of this.announced)
      this.deps.log.info({ path: where }, `storage writable again: ${where}`)
    this.announced.clear()
  }

  private announce(problem: StorageProblem, where: string, code: string | undefined): void {
    if (this.announced.has(where)) return
    this.announced.add(where)
    const what =
      problem === 'disk_full' ? 'disk full' : problem === 'read_only' ? 'read-only' : 'not writable'
    this.deps.log.error(
      { path: where, problem, code },
      `storage failure: cannot write ${where} (${what}${code ? `, ${code}` : ''}); answering 503 and /ready 503 until it is fixed`,
    )
  }
}

/**
 * Start-up check: DATA_DIR exists (made when missing) and takes a file. One line naming the folder
 * when it does not, instead of a stack trace later at the first sign-in or generated key.
 */
export async function assertDataDirWritable(dataDir: string): Promise<void> {
  const file = path.join(dataDir, `.start-probe-${process.pid}`)
  try {
    await fs.mkdir(dataDir, { recursive: true, mode: 0o700 })
    await fs.writeFile(file, 'ok\n', { mode: 0o600 })
    await fs.rm(file, { force: true })
  } catch (err) {
    const code = (err as { code?: string }).code ?? 'error'
    throw new StartupError(
      `DATA_DIR ${path.resolve(dataDir)} is not writable (${code}): the service keeps its generated keys, SQLite file and outbox there`,
      EXIT_STATUS.dataDir,
    )
  }
}
