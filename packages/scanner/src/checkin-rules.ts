/**
 * The check-in rule: whether a scan on a check-in list is accepted, and if not, why. One pure function,
 * used by the service for online scans (POST /tickets/{transfer_uid}/use, use-batch) and by the scanner
 * offline, so both decide alike. No imports and no I/O: it is given the list, the ticket's type, the
 * ticket's earlier accepted scans on that list and the scan's time, all in the event's local time
 * (`YYYY-MM-DDTHH:MM:SS`, optionally with `.SSS`, as `used_timestamp`; only the first 19 characters count).
 *
 * The rule (docs/gate.md, "Lists"):
 * - An exit is always accepted.
 * - An entry is refused `product` when the ticket's type is not on the list, `invalid_time` when the
 *   list has windows and the time is in none of them (`from` and `until` both included).
 * - Otherwise it is accepted when the list allows multiple entries, or the ticket has no accepted entry
 *   on the list yet, or (with `allow_entry_after_exit`) the ticket is out: its last accepted scan there
 *   was an exit, or its last entry was counted out by `exit_all_at` since (everyone inside is counted out
 *   at that local time each day, as if they had left). Else it is refused `already_used`.
 */

export type CheckinDirection = 'entry' | 'exit'

/** Why a scan was refused. The service adds `revoked`, `unknown`, `wrong_event` and `error` (docs/gate.md). */
export type CheckinRuleReason = 'product' | 'invalid_time' | 'already_used'

export interface CheckinRules {
  /** The ticket types the list admits (their uids, `ticket_uid`); null: every type. */
  ticket_type_ids: readonly string[] | null
  allow_multiple_entries: boolean
  allow_entry_after_exit: boolean
  /** Event-local `YYYY-MM-DDTHH:MM:SS` bounds, both included; null or empty: always. */
  windows: readonly { from: string; until: string }[] | null
  /** Event-local `HH:MM` at which everyone inside is counted out, every day; null: never. */
  exit_all_at: string | null
}

/** An accepted scan of the ticket on the list, at its event-local time. */
export interface PriorScan {
  direction: CheckinDirection
  at: string
}

export type CheckinDecision = { accepted: true } | { accepted: false; reason: CheckinRuleReason }

const ACCEPTED: CheckinDecision = { accepted: true }

/** The second a local time names (its first 19 characters compare in time order). */
const second = (local: string) => local.slice(0, 19)

/** The day after a `YYYY-MM-DD` date. */
function nextDay(date: string): string {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number]
  return new Date(Date.UTC(y, m - 1, d + 1)).toISOString().slice(0, 10)
}

/**
 * The first moment after `since` (event-local) at which `exit_all_at` counts everyone out: that day at
 * `exit_all_at` when it is still ahead, else the next day. `YYYY-MM-DDTHH:MM:00`.
 */
export function countedOutAt(exitAllAt: string, since: string): string {
  const sameDay = `${since.slice(0, 10)}T${exitAllAt}:00`
  return sameDay > second(since) ? sameDay : `${nextDay(since.slice(0, 10))}T${exitAllAt}:00`
}

/** The latest of the scans by time (of equal times, the later in the list: the later recorded). */
function latest(scans: readonly PriorScan[]): PriorScan | undefined {
  let last: PriorScan | undefined
  for (const s of scans) if (!last || second(s.at) >= second(last.at)) last = s
  return last
}

/**
 * Whether the ticket is inside the list's area at `now` (event-local): its latest accepted scan there is
 * an entry not counted out by `exit_all_at` since; with the entry's time when it is.
 */
export function presence(
  rules: Pick<CheckinRules, 'exit_all_at'>,
  accepted: readonly PriorScan[],
  now: string,
): { inside: true; since: string } | { inside: false } {
  const last = latest(accepted)
  if (!last || last.direction === 'exit') return { inside: false }
  if (rules.exit_all_at !== null && countedOutAt(rules.exit_all_at, last.at) <= second(now))
    return { inside: false }
  return { inside: true, since: last.at }
}

/** Whether `at` lies in one of the list's windows (always, without windows). */
export function inWindows(rules: Pick<CheckinRules, 'windows'>, at: string): boolean {
  if (!rules.windows || rules.windows.length === 0) return true
  const t = second(at)
  return rules.windows.some((w) => second(w.from) <= t && t <= second(w.until))
}

/**
 * Decides a scan: `ticketType` is the ticket's type uid, `prior` its accepted scans on this list (in the
 * order they were recorded), `at` the scan's event-local time.
 */
export function decideCheckin(
  rules: CheckinRules,
  ticketType: string,
  prior: readonly PriorScan[],
  direction: CheckinDirection,
  at: string,
): CheckinDecision {
  if (direction === 'exit') return ACCEPTED
  if (rules.ticket_type_ids !== null && !rules.ticket_type_ids.includes(ticketType))
    return { accepted: false, reason: 'product' }
  if (!inWindows(rules, at)) return { accepted: false, reason: 'invalid_time' }
  if (rules.allow_multiple_entries) return ACCEPTED
  if (!prior.some((s) => s.direction === 'entry')) return ACCEPTED
  if (rules.allow_entry_after_exit && !presence(rules, prior, at).inside) return ACCEPTED
  return { accepted: false, reason: 'already_used' }
}
