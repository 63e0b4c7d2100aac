import type { FastifyBaseLogger } from 'fastify'
import { pruneAudit } from '../audit/audit.store.js'
import { pruneSetupCodes } from '../devices/setup-codes.store.js'
import { pruneClaimedLinkTokens } from '../holder/holder.store.js'
import type { Metrics } from '../metrics/metrics.js'
import type { Clock } from '../platform/clock.js'
import type { Config } from '../platform/config.js'
import type { Db } from '../platform/db/database.js'
import type { PruneCursor, Pruned } from '../platform/db/prune.js'
import {
  enqueue,
  type JobHandler,
  type JobRunner,
  pruneFinishedJobs,
  recurringJobLagMs,
  releaseDedupeKey,
} from '../platform/jobs/jobs.js'
import { pruneExpiredRefresh } from '../tokens/refresh.store.js'
import { pruneExpiredRevocations } from '../tokens/revocations.store.js'
import { pruneDeliveries } from '../webhooks/webhooks.service.js'

/**
 * Retention: what grows with use is deleted once it has served, in small batches.
 * Each batch is one short statement (deliveries: one short transaction with their attempts), so no
 * lock is held for long and ticket use, sign-in and delivery go on between batches.
 *
 * - revocations and refresh tokens: when they expire (an expired token is refused by its `exp` already);
 * - device set-up codes: when they expire, used or not (useless either way; the audit log keeps who);
 * - finished jobs and finished webhook deliveries with their attempts: after RETENTION_DAYS (pending
 *   deliveries stay); the claim-link tokens of claimed links: RETENTION_DAYS after the claim (the token
 *   of a link nobody claimed stays);
 * - audit rows: after AUDIT_RETENTION_DAYS.
 *
 * One job of the jobs table (dedupe key `retention`) runs it and schedules the next run: an hour later,
 * or at once while a table still had more than a run's worth of rows to delete. A fleet runs it once.
 */
export const RETENTION_JOB = 'retention'
export const RETENTION_BATCH = 500
/** Batches per table and run: a run deletes at most this many batches of each before it yields. */
export const BATCHES_PER_RUN = 20
export const RETENTION_INTERVAL_MS = 3_600_000
const DAY_MS = 86_400_000

export interface RetentionDeps {
  db: Db
  clock: Clock
  log: FastifyBaseLogger
  config: Pick<Config, 'RETENTION_DAYS' | 'AUDIT_RETENTION_DAYS'>
}

type Prune = (db: Db, before: number, limit: number, after?: PruneCursor) => Promise<Pruned>

/**
 * Where a drain stands (the runs that follow each other at once while a table has more): where each
 * table with more stopped, the next run starts there; and the tables it drained already, which it
 * leaves alone until it ends (a batch of them would find nothing, after walking what the drain deleted
 * or, on PostgreSQL, the planner's look at the table's ends doing so). A drain that ends drops it all:
 * the next one, an hour later, starts at the beginning again, so a row that became due behind a cursor
 * meanwhile (a delivery finished long after it was made, a row written with an old time) goes then.
 */
export interface Drain {
  cursors: Record<string, PruneCursor>
  drained: string[]
}

export interface PrunePass {
  /** Some table had more left than a run deletes. */
  more: boolean
  /** Rows deleted per table (tables with none left out). */
  deleted: Record<string, number>
  /** The longest batch: its table and time, the longest any of its statements held the rows it deletes. */
  longestBatch: { table: string; ms: number }
  /** Each batch's time by table, in order (ms). */
  batchMs: Record<string, number[]>
  /** Time spent on each table's batches (ms). */
  tableMs: Record<string, number>
  /** Where the drain stands after this pass: the next pass of the same drain goes on from it. */
  drain: Drain
}

/**
 * One pass over every table the drain has not drained yet, each from where its previous pass stopped
 * (`from`). Each batch starts where the last one stopped, past the index entries of the rows the
 * earlier batches deleted (PostgreSQL keeps them until a vacuum; walking them again made each batch cost
 * more than the last).
 */
export async function pruneOnce(
  { db, clock, log, config }: RetentionDeps,
  from: Drain = { cursors: {}, drained: [] },
): Promise<PrunePass> {
  const now = clock.now()
  const retained = now - config.RETENTION_DAYS * DAY_MS
  const tables: [string, Prune, number][] = [
    ['revoked_tokens', pruneExpiredRevocations, now],
    ['refresh_tokens', pruneExpiredRefresh, now],
    ['jobs', pruneFinishedJobs, retained],
    ['webhook_deliveries', pruneDeliveries, retained],
    ['holder_link_tokens', pruneClaimedLinkTokens, retained],
    ['device_setup_codes', pruneSetupCodes, now],
    ['audit_log', pruneAudit, now - config.AUDIT_RETENTION_DAYS * DAY_MS],
  ]
  let more = false
  let longestBatch = { table: '', ms: 0 }
  const deleted: Record<string, number> = {}
  const tableMs: Record<string, number> = {}
  const batchMs: Record<string, number[]> = {}
  const drain: Drain = { cursors: {}, drained: [] }
  const batch = async ([table, prune, before]: (typeof tables)[number], after?: PruneCursor) => {
    const started = performance.now()
    const pruned = await prune(db, before, RETENTION_BATCH, after)
    const ms = performance.now() - started
    if (ms > longestBatch.ms) longestBatch = { table, ms }
    tableMs[table] = (tableMs[table] ?? 0) + ms
    batchMs[table] = [...(batchMs[table] ?? []), ms]
    if (pruned.deleted > 0) deleted[table] = (deleted[table] ?? 0) + pruned.deleted
    return pruned
  }
  // One table after the other, a batch at a time: a pass holds one connection, and each statement only
  // the rows of its batch.
  for (const table of tables) {
    const [name] = table
    if (from.drained.includes(name)) {
      drain.drained.push(name)
      continue
    }
    let after = from.cursors[name]
    for (let batches = 1; ; batches++) {
      const { last, full } = await batch(table, after)
      if (!full) {
        drain.drained.push(name)
        break
      }
      after = last
      if (batches === BATCHES_PER_RUN) {
        more = true
        if (after) drain.cursors[name] = after
        break
      }
    }
  }
  if (Object.keys(deleted).length > 0) log.info({ deleted }, 'retention: old rows deleted')
  return { more, deleted, longestBatch, batchMs, tableMs, drain }
}

/** A run's payload: the drain it continues (none: a new drain). */
interface RetentionPayload {
  drain?: Drain
}

function retentionJob(deps: RetentionDeps): JobHandler<RetentionPayload> {
  return {
    retrySchedule: [60, 600],
    async run(payload, { jobId }) {
      const { more, drain } = await pruneOnce(deps, payload.drain)
      // Frees the key first, so the next run can be queued while this one still counts as running.
      await releaseDedupeKey(deps.db, jobId)
      // While more is left, the drain goes on at once where it stands; the hourly run starts a new one.
      if (more) await scheduleRetention(deps, deps.clock.now(), drain)
      else await scheduleRetention(deps, deps.clock.now() + RETENTION_INTERVAL_MS)
    },
  }
}

/** Queues a run at `runAt` unless one is queued already (every instance queues one at start). */
export async function scheduleRetention(
  { db, clock }: Pick<RetentionDeps, 'db' | 'clock'>,
  runAt: number,
  drain?: Drain,
) {
  const payload: RetentionPayload = drain ? { drain } : {}
  await enqueue(db, clock.now(), {
    kind: RETENTION_JOB,
    payload,
    runAt,
    dedupeKey: RETENTION_JOB,
    traced: false,
  })
}

/**
 * Registers the job and queues its first run (now, unless a run is queued already), and exports how
 * late retention is, `wristband_retention_lag_seconds`, read from the jobs table at scrape time (every
 * instance of a fleet reads the same row, whichever of them runs the job): 0 while the next run is
 * ahead, growing while a due run does not happen or after the last one failed for good.
 */
export async function startRetention(
  jobs: JobRunner,
  deps: RetentionDeps,
  metrics: Pick<Metrics, 'gauge' | 'onCollect'>,
): Promise<void> {
  jobs.register(RETENTION_JOB, retentionJob(deps))
  await scheduleRetention(deps, deps.clock.now())
  const lag = metrics.gauge({
    name: 'wristband_retention_lag_seconds',
    help: 'How late the retention job is: 0 while its next run is ahead, else seconds since it was due or since its last run failed for good',
    aggregator: 'max',
  })
  metrics.onCollect(async () =>
    lag.set((await recurringJobLagMs(deps.db, RETENTION_JOB, RETENTION_JOB, deps.clock.now())) / 1000),
  )
}
