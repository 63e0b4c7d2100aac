import { findEventSummary } from '../events/events.store.js'
import { findTicketTypes } from '../partner/partner.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { ConflictError, ForbiddenError, NotFoundError, ValidationFailed } from '../platform/errors.js'
import { isRealLocalDateTime, isTimeZone, LocalTimeFormatter } from '../platform/formats.js'
import { type Claims, hasScope, reachesEvent } from '../tokens/claims.js'
import { type CheckinFilter, checkinPage, countsOf } from '../transfers/checkins.store.js'
import type { RefusalReason } from './checkin.schemas.js'
import {
  type CheckinListRow,
  defaultList,
  findList,
  insertList,
  type ListChange,
  listsOf,
  updateList,
} from './checkin-lists.store.js'
import { applyCountOuts, rulesOf } from './checkin-scan.service.js'

/*
 * An event's check-in lists, their live counts and the scan log, for the organiser (docs/gate.md).
 * Administrators of the event (`events:manage`) and its operators manage and read them.
 */

export interface CheckinServiceDeps {
  db: Db
  clock: Clock
}

/** What POST takes (PATCH: any part of it). */
export interface ListInput {
  name: string
  ticket_type_ids?: string[] | null
  allow_multiple_entries?: boolean
  allow_entry_after_exit?: boolean
  windows?: { from: string; until: string }[] | null
  exit_all_at?: string | null
}

const iso = (ms: number | null) => (ms === null ? null : new Date(Number(ms)).toISOString())

/** A list as the routes answer it. */
export function listView(l: CheckinListRow) {
  return {
    id: l.id,
    event_id: l.event_id,
    name: l.name,
    is_default: l.default_of !== null,
    ...rulesOf(l),
    archived_at: iso(l.archived_at),
    created_at: iso(l.created_at)!,
    updated_at: iso(l.updated_at)!,
  }
}

/** Whether the claims may manage and read the event's check-in lists. */
export function mayManageLists(claims: Claims, eventId: number): boolean {
  if (claims.role === 'operator') return reachesEvent(claims, eventId)
  return hasScope(claims, eventId, 'events:manage')
}

/** A list as the scanner sync feed carries it (what `@wristband/scanner` applies offline). */
export type FeedCheckinList = ReturnType<typeof rulesOf> & { id: number; name: string; is_default: boolean }

/** The event's time zone and live lists as the scanner sync feed carries them (the default first). */
export async function feedLists(
  db: Db,
  eventId: number,
  now: number,
): Promise<{ timezone: string; checkin_lists: FeedCheckinList[] } | undefined> {
  const event = await findEventSummary(db, eventId)
  if (!event) return undefined
  await defaultList(db, eventId, now)
  const lists = await listsOf(db, eventId)
  return {
    // A zone the runtime does not know (stored before seeds were checked) would fail every scan: UTC,
    // as the service records that event's uses.
    timezone: isTimeZone(event.timezone) ? event.timezone : 'UTC',
    checkin_lists: lists.map((l) => ({
      id: l.id,
      name: l.name,
      is_default: l.default_of !== null,
      ...rulesOf(l),
    })),
  }
}

const localTime = new LocalTimeFormatter()

/**
 * A list's live counts: inside, entries, exits, counted out, refusals by reason and entries per
 * event-local hour. The counters are kept with the scans; a count-out by `exit_all_at` the job queue has
 * not applied yet is applied first, so the answer is right at the service's time.
 */
export async function listStatus(deps: CheckinServiceDeps, list: CheckinListRow, timezone: string) {
  const { db, clock } = deps
  const now = clock.now()
  if (list.exit_all_at !== null) {
    const local = localTime.format(now, isTimeZone(timezone) ? timezone : 'UTC')
    await db.transaction().execute((tx) => applyCountOuts(tx, list, local))
  }
  const counts = await countsOf(db, list.id)
  const refused: Partial<Record<RefusalReason, number>> = {}
  const hours: { hour: string; entries: number }[] = []
  for (const [measure, n] of counts) {
    if (measure.startsWith('refused:') && n > 0) refused[measure.slice(8) as RefusalReason] = n
    if (measure.startsWith('hour:') && n > 0) hours.push({ hour: measure.slice(5), entries: n })
  }
  hours.sort((a, b) => (a.hour < b.hour ? -1 : 1))
  return {
    checkin_list_id: list.id,
    name: list.name,
    inside: counts.get('inside') ?? 0,
    entries: counts.get('entries') ?? 0,
    exits: counts.get('exits') ?? 0,
    counted_out: counts.get('counted_out') ?? 0,
    refused,
    entries_per_hour: hours,
    at: new Date(now).toISOString(),
  }
}

/** Every live list of an event with its status, the default list first: the dashboard's gate page. */
export async function gateOverview(deps: CheckinServiceDeps, eventId: number, timezone: string) {
  await defaultList(deps.db, eventId, deps.clock.now())
  const lists = await listsOf(deps.db, eventId)
  const out = []
  for (const l of lists)
    out.push({ ...(await listStatus(deps, l, timezone)), is_default: l.default_of !== null })
  return out
}

const WINDOW_LOCAL = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?$/

export class CheckinService {
  constructor(private readonly deps: CheckinServiceDeps) {}

  /** The event (its time zone), after checking the claims may work with its lists; 404 for none. */
  private async event(claims: Claims, eventId: number) {
    if (!mayManageLists(claims, eventId))
      throw new ForbiddenError("This token may not manage the event's check-in lists")
    const event = await findEventSummary(this.deps.db, eventId)
    if (!event) throw new NotFoundError('Event not found')
    return event
  }

  /** A live list of the event (archived: 404 unless `archived`). */
  private async list(eventId: number, listId: number, archived = false): Promise<CheckinListRow> {
    const l = await findList(this.deps.db, listId)
    if (!l || l.event_id !== eventId || (l.archived_at !== null && !archived))
      throw new NotFoundError('Unknown check-in list')
    return l
  }

  async lists(claims: Claims, eventId: number, archived: boolean) {
    await this.event(claims, eventId)
    await defaultList(this.deps.db, eventId, this.deps.clock.now())
    return (await listsOf(this.deps.db, eventId, archived)).map(listView)
  }

  async create(claims: Claims, eventId: number, input: ListInput) {
    await this.event(claims, eventId)
    const now = this.deps.clock.now()
    const change = await this.checked(eventId, input)
    const id = await insertList(this.deps.db, {
      event_id: eventId,
      name: input.name,
      ticket_type_ids: change.ticket_type_ids ?? null,
      allow_multiple_entries: change.allow_multiple_entries ?? 0,
      allow_entry_after_exit: change.allow_entry_after_exit ?? 1,
      windows: change.windows ?? null,
      exit_all_at: change.exit_all_at ?? null,
      created_at: now,
      updated_at: now,
    })
    return listView(await this.list(eventId, id))
  }

  async change(claims: Claims, eventId: number, listId: number, input: Partial<ListInput>) {
    await this.event(claims, eventId)
    const l = await this.list(eventId, listId)
    if (l.default_of !== null)
      throw new ConflictError('The default list keeps the specification’s single use: it cannot be changed')
    const change = await this.checked(eventId, input)
    if (!(await updateList(this.deps.db, listId, change, this.deps.clock.now())))
      throw new NotFoundError('Unknown check-in list')
    return listView(await this.list(eventId, listId))
  }

  async archive(claims: Claims, eventId: number, listId: number) {
    await this.event(claims, eventId)
    const l = await this.list(eventId, listId)
    if (l.default_of !== null) throw new ConflictError('The default list cannot be archived')
    const now = this.deps.clock.now()
    await updateList(this.deps.db, listId, { archived_at: now }, now)
    return listView(await this.list(eventId, listId, true))
  }

  /**
   * A list's live counts: inside, entries, exits, counted out, refusals by reason and entries per
   * event-local hour. The counters are kept with the scans; a count-out by `exit_all_at` the job queue
   * has not applied yet is applied first, so the answer is right at the service's time.
   */
  async status(claims: Claims, eventId: number, listId: number) {
    const event = await this.event(claims, eventId)
    return listStatus(this.deps, await this.list(eventId, listId, true), event.timezone)
  }

  /** A page of the event's scans, newest first; `cursor` is the last page's `next_cursor`. */
  async log(
    claims: Claims,
    eventId: number,
    filter: CheckinFilter,
    cursor: number | undefined,
    limit: number,
  ) {
    await this.event(claims, eventId)
    const rows = await checkinPage(this.deps.db, eventId, filter, cursor, limit + 1)
    const page = rows.slice(0, limit)
    return {
      checkins: page.map((r) => ({
        id: r.id,
        checkin_list_id: r.list_id,
        transfer_uid: r.transfer_uid,
        direction: r.direction as 'entry' | 'exit',
        result: r.result as 'accepted' | 'refused',
        reason: r.reason as RefusalReason | null,
        first_use: r.first_use === 1,
        scanned_at: iso(r.scanned_at)!,
        local_at: r.local_at,
        gate: r.gate,
        device_id: r.device_id,
        actor: r.actor,
        offline: r.offline === 1,
      })),
      next_cursor: rows.length > limit ? String(page[page.length - 1]!.id) : null,
    }
  }

  /** The stored form of a list's input, checked against the event's ticket types. */
  private async checked(eventId: number, input: Partial<ListInput>): Promise<ListChange> {
    const issues = []
    if (input.ticket_type_ids) {
      const known = await findTicketTypes(this.deps.db, eventId, input.ticket_type_ids)
      for (const [i, uid] of input.ticket_type_ids.entries())
        if (!known.has(uid))
          issues.push({
            loc: ['body', 'ticket_type_ids', i],
            msg: 'Value error, no ticket type of this event',
            type: 'value_error',
            input: uid,
          })
    }
    for (const [i, w] of (input.windows ?? []).entries())
      for (const end of ['from', 'until'] as const)
        if (!WINDOW_LOCAL.test(w[end]) || !isRealLocalDateTime(`${w[end].slice(0, 19)}.000`))
          issues.push({
            loc: ['body', 'windows', i, end],
            msg: 'Value error, not a real event-local YYYY-MM-DDTHH:MM:SS',
            type: 'value_error',
            input: w[end],
          })
        else if (end === 'until' && w.until.slice(0, 19) < w.from.slice(0, 19))
          issues.push({
            loc: ['body', 'windows', i, 'until'],
            msg: 'Value error, before `from`',
            type: 'value_error',
            input: w.until,
          })
    if (issues.length) throw new ValidationFailed(issues)
    const bool = (b: boolean | undefined) => (b === undefined ? undefined : b ? 1 : 0)
    const change: ListChange = {
      name: input.name,
      ticket_type_ids:
        input.ticket_type_ids === undefined
          ? undefined
          : input.ticket_type_ids === null
            ? null
            : JSON.stringify([...new Set(input.ticket_type_ids)]),
      allow_multiple_entries: bool(input.allow_multiple_entries),
      allow_entry_after_exit: bool(input.allow_entry_after_exit),
      windows:
        input.windows === undefined
          ? undefined
          : input.windows === null || input.windows.length === 0
            ? null
            : JSON.stringify(input.windows.map((w) => ({ from: w.from, until: w.until }))),
      exit_all_at: input.exit_all_at,
    }
    return Object.fromEntries(Object.entries(change).filter(([, v]) => v !== undefined)) as ListChange
  }
}
