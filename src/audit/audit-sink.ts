import type { FastifyBaseLogger } from 'fastify'
import type { Clock } from '../platform/clock.js'
import type { Db, Dialect } from '../platform/db/database.js'
import type { HttpClient } from '../platform/http-client.js'
import { enqueue, type JobHandler, type JobRunner, releaseDedupeKey } from '../platform/jobs/jobs.js'
import { presentForward } from './audit.service.js'
import { type AuditCursor, listAuditAfter, readSinkState, writeSinkState } from './audit.store.js'

/**
 * The audit sink (AUDIT_SINK_URL): the audit log sent to a collector (a SIEM) as it is written, each
 * record once, in the order of `GET /admin/audit?after=` (docs/observability.md, "Audit export").
 *
 * One job of the jobs table (dedupe key `audit-sink`, so a fleet runs one at a time) reads the records
 * after the cursor the receiver acknowledged last (`audit_sink`, kept in the database: a restart sends
 * on from there), POSTs them as JSON lines, a batch at a time, and stores the cursor of a batch once the
 * receiver answered it with a 2xx. Any other answer, or none, leaves the cursor where it was: the same
 * records are sent again after a back-off that doubles from a second up to a minute. Delivery is at
 * least once: a batch acknowledged by the receiver but not yet recorded as such when the process died
 * is sent again (each line's `cursor` and `id` let the receiver drop a repeat).
 */
export const AUDIT_SINK_JOB = 'audit-sink'
const SINK_NAME = 'default'
/** Records per POST. */
export const AUDIT_SINK_BATCH = 500
/** Batches a run sends before it yields to other jobs (and queues itself at once). */
const BATCHES_PER_RUN = 20
const MAX_BACKOFF_MS = 60_000

export interface AuditSinkDeps {
  db: Db
  dialect: Dialect
  clock: Clock
  log: FastifyBaseLogger
  http: HttpClient
  url: string
  authorization: string | undefined
  pollMs: number
}

/** The cursor the receiver acknowledged last and the failures since (the start of the log before any). */
async function sinkState(db: Db): Promise<{ after: AuditCursor; failures: number }> {
  const row = await readSinkState(db, SINK_NAME)
  return row
    ? { after: { tx: row.after_tx, id: row.after_id }, failures: row.failures }
    : { after: { tx: 0, id: 0 }, failures: 0 }
}

/** Sends what is new; returns the delay before the next run. */
async function deliver(deps: AuditSinkDeps, signal: AbortSignal): Promise<number> {
  const { db, dialect, clock, log } = deps
  const state = await sinkState(db)
  try {
    for (let batch = 0; batch < BATCHES_PER_RUN; batch++) {
      const rows = await listAuditAfter(db, dialect, { after: state.after, limit: AUDIT_SINK_BATCH })
      if (rows.length === 0) return deps.pollMs
      // A runner that lost its lease leaves the sending to the one that took it over.
      if (signal.aborted) return deps.pollMs
      const body = `${rows.map((r) => JSON.stringify(presentForward(r))).join('\n')}\n`
      const res = await deps.http.post(deps.url, {
        headers: {
          'content-type': 'application/x-ndjson',
          'user-agent': 'wristband-audit-sink',
          ...(deps.authorization ? { authorization: deps.authorization } : {}),
        },
        body,
      })
      if (res.status < 200 || res.status > 299) throw new Error(`the receiver answered ${res.status}`)
      const last = rows[rows.length - 1]!
      state.after = { tx: last.tx, id: last.id }
      state.failures = 0
      await writeSinkState(db, { name: SINK_NAME, ...state, lastError: null, now: clock.now() })
      if (rows.length < AUDIT_SINK_BATCH) return deps.pollMs
    }
    return 0
  } catch (err) {
    const failures = state.failures + 1
    const message = (err as Error).message ?? String(err)
    const delay = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** Math.min(failures - 1, 10))
    log.warn(
      { failures, retryInMs: delay, err: { message } },
      'audit sink: delivery failed; sending again from the last acknowledged record',
    )
    await writeSinkState(db, {
      name: SINK_NAME,
      after: state.after,
      failures,
      lastError: message,
      now: clock.now(),
    })
    return Math.max(delay, deps.pollMs)
  }
}

function sinkJob(deps: AuditSinkDeps): JobHandler<Record<string, never>> {
  return {
    // Only a database that cannot be read or written fails a run; the next start queues one anyway.
    retrySchedule: [1, 5, 30, 60, 300, 600, 1800, 3600],
    async run(_payload, { jobId, signal }) {
      const delay = await deliver(deps, signal)
      // The next run is queued in the same transaction that frees this one's key: one run at a time.
      await deps.db.transaction().execute(async (tx) => {
        await releaseDedupeKey(tx, jobId)
        await enqueue(tx, deps.clock.now(), {
          kind: AUDIT_SINK_JOB,
          payload: {},
          runAt: deps.clock.now() + delay,
          dedupeKey: AUDIT_SINK_JOB,
          traced: false,
        })
      })
    },
  }
}

/** Registers the sink's job and queues its first run unless one is queued (every instance does at start). */
export async function startAuditSink(jobs: JobRunner, deps: AuditSinkDeps): Promise<void> {
  jobs.register(AUDIT_SINK_JOB, sinkJob(deps))
  await enqueue(deps.db, deps.clock.now(), {
    kind: AUDIT_SINK_JOB,
    payload: {},
    dedupeKey: AUDIT_SINK_JOB,
    traced: false,
  })
}
