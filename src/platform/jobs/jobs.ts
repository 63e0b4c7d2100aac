import { performance } from 'node:perf_hooks'
import type { FastifyBaseLogger } from 'fastify'
import { sql } from 'kysely'
import type { Clock } from '../clock.js'
import type { Db, Dialect } from '../db/database.js'
import type { PruneCursor, Pruned } from '../db/prune.js'
import type { JobsTable } from '../db/schema.js'
import { continueTrace, currentTraceparent, traced } from '../tracing.js'

/** A kind of background work. Runs at least once; a handler must tolerate a repeat. */
export interface JobHandler<P> {
  /** Seconds to wait before each retry; after the last one the job is marked failed. */
  retrySchedule: readonly number[]
  /**
   * Work that may wait for the requests (an on-sale's holder e-mails): a poll claims it only when this
   * process answers no request and its event loop was busy less than half the time since the previous
   * poll, so a burst of requests is answered first (its CPU and its database connections and commits
   * are not shared with the work it queued) and the work follows; once due for YIELD_AT_MOST_MS it is
   * claimed however busy the process is.
   */
  yieldsToRequests?: boolean
  /**
   * `signal` is aborted when the job's lease was lost (this runner froze past it and another claimed
   * the job): check it before a step that cannot be taken back, such as sending.
   */
  run(payload: P, ctx: { jobId: number; attempt: number; signal: AbortSignal }): Promise<void>
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
  /**
   * False for a job that queues itself again (retention, the audit sink): it would carry the trace of
   * its first run into every later one. Otherwise the job continues the trace active when it was queued.
   */
  traced?: boolean
}

const jobRow = (job: NewJob, now: number) => ({
  kind: job.kind,
  payload: JSON.stringify(job.payload),
  dedupe_key: job.dedupeKey ?? null,
  run_at: job.runAt ?? now,
  created_at: now,
  traceparent: job.traced === false ? null : (currentTraceparent() ?? null),
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
  /** How long a claim reserves a job; renewed every third of it while the job runs. */
  leaseMs: number
  /** Requests the process is answering now: jobs that yield to requests wait while there are any. */
  requestsInFlight?: () => number
}

/** The most jobs one runner runs at once. */
const BATCH = 20

/** While requests are answered or above this share of busy event loop since the previous poll, jobs that yield to requests wait... */
const BUSY = 0.5
/** ...for at most this long past their time. */
const YIELD_AT_MOST_MS = 60_000

interface ClaimedJob {
  id: number
  kind: string
  payload: string
  /** Also the claim's fencing token: a later claim of the job raises it. */
  attempts: number
  /** The trace of the request that queued it, when that was traced. */
  traceparent: string | null
}

/**
 * Polls the jobs table and runs due jobs. Several instances may run at once: a job is claimed with a
 * lease (row locking with SKIP LOCKED on PostgreSQL, SQLite's single writer otherwise), renewed while
 * it runs, and a job whose runner died is picked up again when its lease expires. Each claim raises
 * `attempts`; a runner writes to its job only while `attempts` is still the one it claimed, so a
 * runner that lost its lease (frozen past it) neither renews it, nor marks the job done, nor reschedules
 * it, and its handler sees `signal` aborted before it does anything it cannot take back.
 *
 * A poll claims what free slots there are and starts the jobs without waiting for them: one slow job
 * (a mail server that takes its time) does not hold up the next poll.
 */
export class JobRunner {
  private readonly handlers = new Map<string, JobHandler<unknown>>()
  private readonly inFlight = new Set<Promise<void>>()
  private timer: NodeJS.Timeout | undefined
  private polling: Promise<unknown> | undefined
  private stopped = true
  /** The event loop's use at the previous poll. */
  private loop = performance.eventLoopUtilization()

  constructor(private readonly deps: JobRunnerDeps) {}

  register<P>(kind: string, handler: JobHandler<P>): void {
    this.handlers.set(kind, handler as JobHandler<unknown>)
  }

  start(): void {
    this.stopped = false
    this.schedule(0)
  }

  /** Stops polling and waits for the jobs in flight. */
  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.polling
    await Promise.all(this.inFlight)
  }

  /** Claims the due jobs there is room for and resolves, with their count, once they ran. Tests call it to skip the poll delay. */
  async runDue(): Promise<number> {
    const started = await this.claimAndStart()
    await Promise.all(started)
    return started.length
  }

  private schedule(delay: number) {
    if (this.stopped) return
    this.timer = setTimeout(async () => {
      const poll = this.claimAndStart(this.busy())
      this.polling = poll.catch(() => undefined)
      try {
        const started = await poll
        // A full claim suggests more are due: look again once a slot is free, else at the next poll.
        this.schedule(started.length > 0 && this.inFlight.size < BATCH ? 0 : this.deps.pollMs)
      } catch (err) {
        this.deps.log.warn({ err: { message: (err as Error).message } }, 'job poll failed; retrying')
        this.schedule(this.deps.pollMs * 5)
      }
    }, delay)
    this.timer.unref()
  }

  /** Whether the event loop was busy more than BUSY of the time since the previous poll. */
  private busy(): boolean {
    const now = performance.eventLoopUtilization()
    const since = performance.eventLoopUtilization(now, this.loop)
    this.loop = now
    return since.utilization > BUSY || (this.deps.requestsInFlight?.() ?? 0) > 0
  }

  /** Claims due jobs up to the free slots (none that yield to requests while `busy`) and starts each; resolves with their completions. */
  private async claimAndStart(busy = false): Promise<Promise<void>[]> {
    const room = BATCH - this.inFlight.size
    if (room <= 0) return []
    const waiting = busy ? [...this.handlers].filter(([, h]) => h.yieldsToRequests).map(([kind]) => kind) : []
    const jobs = await this.claim(this.deps.clock.now(), room, waiting)
    return jobs.map((job) => {
      // A job's own failure is handled in runOne; what can still fail is writing its outcome (the
      // database gone meanwhile). Its lease then lapses and the job runs again: logged, never an
      // unhandled rejection, which would end the process (a poll does not wait for what it started).
      const run = this.runOne(job)
        .catch((err) =>
          this.deps.log.warn(
            { jobId: job.id, kind: job.kind, err: { message: (err as Error).message } },
            'could not record a job outcome; it runs again when its lease ends',
          ),
        )
        .finally(() => this.inFlight.delete(run))
      this.inFlight.add(run)
      return run
    })
  }

  private async claim(now: number, limit: number, waiting: string[]): Promise<ClaimedJob[]> {
    const { db, dialect, leaseMs } = this.deps
    let due = db
      .selectFrom('jobs')
      .select('id')
      .$if(waiting.length > 0, (q) =>
        q.where((eb) => eb.or([eb('kind', 'not in', waiting), eb('run_at', '<=', now - YIELD_AT_MOST_MS)])),
      )
      .where('done_at', 'is', null)
      .where('failed_at', 'is', null)
      .where('run_at', '<=', now)
      .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', now)]))
      .orderBy('run_at')
      .limit(limit)
    if (dialect === 'postgres') due = due.forUpdate().skipLocked()
    return db
      .updateTable('jobs')
      .set({ locked_until: now + leaseMs, attempts: sql`attempts + 1` })
      .where('id', 'in', due)
      .returning(['id', 'kind', 'payload', 'attempts', 'traceparent'])
      .execute()
  }

  /** Writes to a job only while this runner's claim holds (no later claim raised `attempts`). */
  private async update(job: ClaimedJob, set: Partial<Omit<JobsTable, 'id' | 'attempts'>>) {
    const r = await this.deps.db
      .updateTable('jobs')
      .set(set)
      .where('id', '=', job.id)
      .where('attempts', '=', job.attempts)
      .where('done_at', 'is', null)
      .where('failed_at', 'is', null)
      .executeTakeFirst()
    return Number(r.numUpdatedRows) > 0
  }

  /** Renews the lease every third of it until `done`; aborts `lease` when the job is no longer ours. */
  private heartbeat(job: ClaimedJob, lease: AbortController): () => void {
    const { clock, log, leaseMs } = this.deps
    const timer = setInterval(
      () => {
        this.update(job, { locked_until: clock.now() + leaseMs }).then(
          (held) => {
            if (held) return
            log.warn(
              { jobId: job.id, kind: job.kind },
              'job lease lost to another runner; leaving the job to it',
            )
            lease.abort()
            clearInterval(timer)
          },
          // A failed renewal (database unreachable) is tried again at the next beat; the lease still runs.
          (err) =>
            log.warn({ jobId: job.id, err: { message: (err as Error).message } }, 'job lease renewal failed'),
        )
      },
      Math.max(1, Math.floor(leaseMs / 3)),
    )
    timer.unref()
    return () => clearInterval(timer)
  }

  private async runOne(job: ClaimedJob) {
    const { clock, log } = this.deps
    const handler = this.handlers.get(job.kind)
    const lease = new AbortController()
    const stopBeating = this.heartbeat(job, lease)
    try {
      if (!handler) throw new Error(`no handler for job kind ${job.kind}`)
      const run = () =>
        handler.run(JSON.parse(job.payload), { jobId: job.id, attempt: job.attempts, signal: lease.signal })
      await continueTrace(job.traceparent, () =>
        traced(`job ${job.kind}`, { 'job.id': job.id, 'job.attempt': job.attempts }, run),
      )
      stopBeating()
      await this.update(job, { done_at: clock.now(), locked_until: null, dedupe_key: null, last_error: null })
    } catch (err) {
      stopBeating()
      if (lease.signal.aborted) return
      const message = (err as Error).message?.slice(0, 500) ?? 'error'
      const schedule = handler?.retrySchedule ?? []
      const now = clock.now()
      if (job.attempts > schedule.length) {
        log.error({ jobId: job.id, kind: job.kind, err: { message } }, 'job failed for good')
        await this.update(job, { failed_at: now, locked_until: null, dedupe_key: null, last_error: message })
        return
      }
      const delay = err instanceof RetryLater ? err.delayMs : schedule[job.attempts - 1]! * 1000
      log.warn(
        { jobId: job.id, kind: job.kind, attempt: job.attempts, err: { message } },
        'job attempt failed',
      )
      await this.update(job, { run_at: now + delay, locked_until: null, last_error: message })
    }
  }
}

/**
 * Deletes up to `limit` jobs that finished (done or failed for good) before `before`, past `after`.
 * Two ranges of the index jobs_due (done_at, failed_at, run_at), each in time order: done, then failed
 * for good. The cursor is the range and the time it reached, [time, 'done' | 'failed']; a batch starts
 * at that time itself (the index orders the jobs of one millisecond by nothing a query can name), so it
 * walks again only the deleted entries of that millisecond, never those of the batches before.
 */
export async function pruneFinishedJobs(
  db: Db,
  before: number,
  limit: number,
  after?: PruneCursor,
): Promise<Pruned> {
  const ranges = ['done', 'failed'] as const
  let n = 0
  let last: PruneCursor | undefined
  for (const range of after?.[1] === 'failed' ? ranges.slice(1) : ranges) {
    const column = range === 'done' ? 'done_at' : 'failed_at'
    let finished = db.selectFrom('jobs').select('id').where(column, '<', before).orderBy('done_at')
    // done_at is null throughout the second range: ordered by it first, the index's order serves it.
    if (range === 'failed') finished = finished.where('done_at', 'is', null).orderBy('failed_at')
    if (after?.[1] === range) finished = finished.where(column, '>=', after[0])
    const rows = await db
      .deleteFrom('jobs')
      .where('id', 'in', finished.limit(limit - n))
      .returning(column)
      .execute()
    n += rows.length
    if (rows.length > 0) last = [Math.max(...rows.map((r) => Number(r[column]))), range]
    if (n >= limit) break
  }
  return last === undefined ? { deleted: n, full: false } : { deleted: n, last, full: n >= limit }
}

/**
 * How late a recurring job (one that queues its next run under `dedupeKey`) is, in ms: 0 while its next
 * run is in the future; how long it has been due when it has not run (the runners stopped, or it keeps
 * being retried); and, when no run is queued at all (its last run failed for good, or finished without
 * queuing the next), the time since that last run ended. The queued run is found by the unique
 * dedupe key; only when there is none is the newest job of `kind` looked for. 0 when it never ran.
 */
export async function recurringJobLagMs(
  db: Db,
  kind: string,
  dedupeKey: string,
  now: number,
): Promise<number> {
  const queued = await db
    .selectFrom('jobs')
    .select('run_at')
    .where('dedupe_key', '=', dedupeKey)
    .where('done_at', 'is', null)
    .where('failed_at', 'is', null)
    .executeTakeFirst()
  if (queued) return Math.max(0, now - Number(queued.run_at))
  const last = await db
    .selectFrom('jobs')
    .select(['run_at', 'done_at', 'failed_at'])
    .where('kind', '=', kind)
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst()
  if (!last) return 0
  const ended = last.failed_at ?? last.done_at
  return Math.max(0, now - Number(ended ?? last.run_at))
}
