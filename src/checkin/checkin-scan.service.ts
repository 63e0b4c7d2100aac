import {
  type CheckinDirection,
  type CheckinRules,
  countedOutAt,
  decideCheckin,
  type PriorScan,
  presence,
} from '../../packages/scanner/src/checkin-rules.js'
import type { Db } from '../platform/db/database.js'
import { epochOfLocal } from '../platform/formats.js'
import { enqueue, type JobHandler } from '../platform/jobs/jobs.js'
import { acceptedScans, addCounts, countOut, lockPresence, setPresence } from '../transfers/checkins.store.js'
import type { RefusalReason } from './checkin.schemas.js'
import { type CheckinListRow, claimCountOut, findList } from './checkin-lists.store.js'

export type { RefusalReason }

/*
 * A scan on a check-in list, decided by the one check-in rule the scanner applies offline too
 * (packages/scanner/src/checkin-rules.ts) and counted where it is recorded (docs/gate.md).
 */

/** A list's rules as the check-in rule takes them. */
export function rulesOf(list: CheckinListRow): CheckinRules & {
  ticket_type_ids: string[] | null
  windows: { from: string; until: string }[] | null
} {
  return {
    ticket_type_ids: list.ticket_type_ids === null ? null : (JSON.parse(list.ticket_type_ids) as string[]),
    allow_multiple_entries: list.allow_multiple_entries === 1,
    allow_entry_after_exit: list.allow_entry_after_exit === 1,
    windows: list.windows === null ? null : (JSON.parse(list.windows) as { from: string; until: string }[]),
    exit_all_at: list.exit_all_at,
  }
}

/** The day before a `YYYY-MM-DD` date. */
function dayBefore(date: string): string {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number]
  return new Date(Date.UTC(y, m - 1, d - 1)).toISOString().slice(0, 10)
}

/** The latest `exit_all_at` moment at or before `now` (event-local), `YYYY-MM-DDTHH:MM:00`. */
export function latestCountOut(exitAllAt: string, now: string): string {
  const sameDay = `${now.slice(0, 10)}T${exitAllAt}:00`
  return sameDay <= now.slice(0, 19) ? sameDay : `${dayBefore(now.slice(0, 10))}T${exitAllAt}:00`
}

/**
 * Counts out, once, everyone inside the list's area before its latest `exit_all_at` moment up to `now`
 * (event-local): the job queue does it at each moment, and a scan or a status read does it first when
 * the job has not run yet, so neither ever sees someone inside who was counted out. In the caller's
 * transaction, before it takes any ticket's place on the list.
 */
export async function applyCountOuts(tx: Db, list: CheckinListRow, now: string): Promise<void> {
  if (list.exit_all_at === null) return
  const moment = latestCountOut(list.exit_all_at, now)
  if (list.counted_out_until !== null && list.counted_out_until >= moment) return
  if (await claimCountOut(tx, list.id, moment)) await countOut(tx, list.id, moment)
}

export const COUNT_OUT_JOB = 'checkin_count_out'

interface CountOutPayload {
  list_id: number
  timezone: string
}

/** The job that counts a list's area out at an `exit_all_at` moment. */
export function countOutJob(deps: {
  db: Db
  clock: { now(): number }
  localTime: (ms: number, timeZone: string) => string
}): JobHandler<CountOutPayload> {
  return {
    retrySchedule: [5, 30, 120],
    async run(p) {
      await deps.db.transaction().execute(async (tx) => {
        const list = await findList(tx, p.list_id)
        if (list) await applyCountOuts(tx, list, deps.localTime(deps.clock.now(), p.timezone))
      })
    },
  }
}

export interface ListScan {
  list: CheckinListRow
  transferId: number
  ticketType: string
  direction: CheckinDirection
  /** The scan's event-local time. */
  at: string
  /** The service's time now, event-local. */
  now: string
  /** The device refused the scan offline, for this reason: recorded as refused, not decided again. */
  refusedOffline?: RefusalReason
}

export type ListDecision = { accepted: true } | { accepted: false; reason: RefusalReason }

/**
 * Decides a scan of a ticket on a list and counts it (entries, exits, inside, counted out, refusals,
 * entries per hour), in the caller's transaction; the caller records the scan and, for an accepted
 * entry, the ticket's use. Also schedules the count-out of an accepted entry's `exit_all_at`.
 */
export async function decideAndCount(
  tx: Db,
  s: ListScan,
  schedule: { timezone: string; now: number },
): Promise<ListDecision> {
  await applyCountOuts(tx, s.list, s.now)
  const insideSince = await lockPresence(tx, s.list.id, s.transferId)
  const rules = rulesOf(s.list)
  const prior: PriorScan[] = (await acceptedScans(tx, s.list.id, s.transferId)).map((r) => ({
    direction: r.direction as CheckinDirection,
    at: r.local_at,
  }))
  const decision: ListDecision = s.refusedOffline
    ? { accepted: false, reason: s.refusedOffline }
    : decideCheckin(rules, s.ticketType, prior, s.direction, s.at)
  if (!decision.accepted) {
    await addCounts(tx, s.list.id, { [`refused:${decision.reason}`]: 1 })
    return decision
  }
  const scans = [...prior, { direction: s.direction, at: s.at }]
  const after = presence(rules, scans, s.now)
  const wasInside = insideSince !== null
  const isLatest = prior.every((p) => p.at.slice(0, 19) < s.at.slice(0, 19))
  // An entry recorded after its area was counted out (an offline upload): it entered and was counted out.
  const countedOut = s.direction === 'entry' && !after.inside && isLatest ? 1 : 0
  await addCounts(tx, s.list.id, {
    [s.direction === 'entry' ? 'entries' : 'exits']: 1,
    inside: (after.inside ? 1 : 0) - (wasInside ? 1 : 0),
    counted_out: countedOut,
    ...(s.direction === 'entry' ? { [`hour:${s.at.slice(0, 13)}`]: 1 } : {}),
  })
  const since = after.inside ? after.since.slice(0, 19) : null
  if (since !== insideSince) await setPresence(tx, s.list.id, s.transferId, since)
  if (after.inside && s.list.exit_all_at !== null) {
    const moment = countedOutAt(s.list.exit_all_at, after.since)
    await enqueue(tx, schedule.now, {
      kind: COUNT_OUT_JOB,
      payload: { list_id: s.list.id, timezone: schedule.timezone } satisfies CountOutPayload,
      runAt: epochOfLocal(moment, schedule.timezone),
      dedupeKey: `${COUNT_OUT_JOB}:${s.list.id}:${moment}`,
    })
  }
  return decision
}
