import type { FastifyBaseLogger } from 'fastify'
import { sql } from 'kysely'
import type { Clock } from '../clock.js'
import type { Db, Dialect } from '../db/database.js'

/** A kind of background work. Runs at least once; a handler must tolerate a repeat. */
export interface JobHandler<P> {
  /** Seconds to wait before each retry; after the last one the job is marked failed. */
  retrySchedule: readonly number[]
  run(payload: P, ctx: { jobId: number; attempt: number }): Promise<void>
}

/** Thrown by a handler to be retried after a delay of its choosing (e.g. a Retry-After header). */
export class RetryLater extends Error {
  constructor(
    readonly delayMs: number,
    message: string,
  ) {
    super(message)
  }
}

export interface NewJob {
  kind: string
  payload: unknown
  /** Epoch ms; now when absent. */
  runAt?: number
  /** While a job with this key is pending, enqueuing another with the same key does nothing. */
  dedupeKey?: string
}

const jobRow = (job: NewJob, now: number) => ({
  kind: job.kind,
  payload: JSON.stringify(job.payload),
  dedupe_key: job.dedupeKey ?? null,
  run_at: job.runAt ?? now,
  created_at: now,
})

/**
 * Adds a job. Pass the transaction of the change that causes the job so both commit or neither does.
 * Returns false when a pending job with the same dedupe key already exists.
 */
export async function enqueue(db: Db, now: number, job: NewJob): Promise<boolean> {
  const r = await db
    .insertInto('jobs')
    .values(jobRow(job, now))
    .onConflict((oc) => oc.column('dedupe_key').doNothing())
    .executeTakeFirst()
  return Number(r.numInsertedOrUpdatedRows ?? 0) > 0
}

/** Adds many jobs in one statement per 200 (in the caller's transaction); those whose dedupe key is pending are skipped. */
export async function enqueueMany(db: Db, now: number, jobs: NewJob[]): Promise<void> {
  for (let i = 0; i < jobs.length; i += 200)
    await db
      .insertInto('jobs')
      .values(jobs.slice(i, i + 200).map((job) => jobRow(job, now)))
      .onConflict((oc) => oc.column('dedupe_key').doNothing())
      .execute()
}

/** Moves the pending job with this dedupe key forward to `now` (a no-op when there is none). */
export async function runPendingNow(db: Db, dedupeKey: string, now: number): Promise<void> {
  await db.updateTable('jobs').set({ run_at: now }).where('dedupe_key', '=', dedupeKey).execute()
}

/**
 * Frees a running job's dedupe key, so that a change committed from now on enqueues a new job instead
 * of relying on this one (which has already read what it works on).
 */
export async function releaseDedupeKey(db: Db, jobId: number): Promise<void> {
  await db.updateTable('jobs').set({ dedupe_key: null }).where('id', '=', jobId).execute()
}

export interface JobRunnerDeps {
  db: Db
  dialect: Dialect
  clock: Clock
  log: FastifyBaseLogger
  pollMs: number
}

const LEASE_MS = 60_000
const BATCH = 20

/**
 * Polls the jobs table and runs due jobs. Several instances may run at once: a job is claimed with a
 * lease (row locking with SKIP LOCKED on PostgreSQL, SQLite's single writer otherwise), and a job
 * whose runner died is picked up again when its lease expires.
 */
export class JobRunner {
  private readonly handlers = new Map<string, JobHandler<unknown>>()
  private timer: NodeJS.Timeout | undefined
  private running: Promise<number> | undefined
  private stopped = true

  constructor(private readonly deps: JobRunnerDeps) {}

  register<P>(kind: string, handler: JobHandler<P>): void {
    this.handlers.set(kind, handler as JobHandler<unknown>)
  }

  start(): void {
    this.stopped = false
    this.schedule(0)
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.running
  }

  /** Runs every due job once; resolves with how many ran. Tests call it to skip the poll delay. */
  runDue(): Promise<number> {
    this.running ??= this.claimAndRun().finally(() => {
      this.running = undefined
    })
    return this.running
  }

  private schedule(delay: number) {
    if (this.stopped) return
    this.timer = setTimeout(async () => {
      try {
        const n = await this.runDue()
        this.schedule(n === BATCH ? 0 : this.deps.pollMs)
      } catch (err) {
        this.deps.log.warn({ err: { message: (err as Error).message } }, 'job poll failed; retrying')
        this.schedule(this.deps.pollMs * 5)
      }
    }, delay)
    this.timer.unref()
  }

  private async claim(now: number) {
    const { db, dialect } = this.deps
    let due = db
      .selectFrom('jobs')
      .select('id')
      .where('done_at', 'is', null)
      .where('failed_at', 'is', null)
      .where('run_at', '<=', now)
      .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', now)]))
      .orderBy('run_at')
      .limit(BATCH)
    if (dialect === 'postgres') due = due.forUpdate().skipLocked()
    return db
      .updateTable('jobs')
      .set({ locked_until: now + LEASE_MS, attempts: sql`attempts + 1` })
      .where('id', 'in', due)
      .returning(['id', 'kind', 'payload', 'attempts'])
      .execute()
  }

  private async claimAndRun(): Promise<number> {
    const jobs = await this.claim(this.deps.clock.now())
    await Promise.all(jobs.map((job) => this.runOne(job)))
    return jobs.length
  }

  private async runOne(job: { id: number; kind: string; payload: string; attempts: number }) {
    const { db, clock, log } = this.deps
    const handler = this.handlers.get(job.kind)
    try {
      if (!handler) throw new Error(`no handler for job kind ${job.kind}`)
      await handler.run(JSON.parse(job.payload), { jobId: job.id, attempt: job.attempts })
      await db
        .updateTable('jobs')
        .set({ done_at: clock.now(), locked_until: null, dedupe_key: null, last_error: null })
        .where('id', '=', job.id)
        .execute()
    } catch (err) {
      const message = (err as Error).message?.slice(0, 500) ?? 'error'
      const schedule = handler?.retrySchedule ?? []
      const now = clock.now()
      if (job.attempts > schedule.length) {
        log.error({ jobId: job.id, kind: job.kind, err: { message } }, 'job failed for good')
        await db
          .updateTable('jobs')
          .set({ failed_at: now, locked_until: null, dedupe_key: null, last_error: message })
          .where('id', '=', job.id)
          .execute()
        return
      }
      const delay = err instanceof RetryLater ? err.delayMs : schedule[job.attempts - 1]! * 1000
      log.warn(
        { jobId: job.id, kind: job.kind, attempt: job.attempts, err: { message } },
        'job attempt failed',
      )
      await db
        .updateTable('jobs')
        .set({ run_at: now + delay, locked_until: null, last_error: message })
        .where('id', '=', job.id)
        .execute()
    }
  }
}

/** Deletes up to `limit` jobs that finished (done or failed for good) before `before`; returns how many. */
export async function pruneFinishedJobs(db: Db, before: number, limit: number): Promise<number> {
  let n = 0
  // Two ranges of the index jobs_due (done_at, failed_at, run_at): done, then failed for good.
  for (const finished of [
    db.selectFrom('jobs').select('id').where('done_at', '<', before),
    db.selectFrom('jobs').select('id').where('done_at', 'is', null).where('failed_at', '<', before),
  ]) {
    const r = await db
      .deleteFrom('jobs')
      .where('id', 'in', finished.limit(limit - n))
      .executeTakeFirst()
    n += Number(r.numDeletedRows)
    if (n >= limit) break
  }
  return n
}
