import type { Static } from 'typebox'
import { findEventSummary } from '../events/events.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { SLOT_MS } from '../platform/db/migrations/019-scale.js'
import { NotFoundError } from '../platform/errors.js'
import { fromMinorUnits } from '../platform/formats.js'
import { sharedReads } from '../platform/shared-reads.js'
import { partnerTicketFigures, partnerUsesPerGate, partnerUsesPerSlot } from '../transfers/transfers.store.js'
import type { WebhookDeliveries } from '../webhooks/webhooks.service.js'
import { partnerDeliveryCounts } from '../webhooks/webhooks.store.js'
import type { EventStats } from './stats.schemas.js'
import {
  byUses,
  eventListFigures,
  lastFailedAttempt,
  ticketTypeFigures,
  usesPerGate,
  usesPerSlot,
  webhookHealth,
} from './stats.store.js'
import type { Range } from './templates.js'
import { type Viewer, visibleEvents, visiblePartners } from './viewers.js'

export interface StatsDeps {
  db: Db
  clock: Clock
}

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

/** Bucket width and count of each range of the uses-over-time chart. */
export const RANGE_BUCKETS: Record<Range, { bucketMs: number; buckets: number }> = {
  '1h': { bucketMs: 5 * MINUTE, buckets: 12 },
  '24h': { bucketMs: HOUR, buckets: 24 },
  '7d': { bucketMs: 6 * HOUR, buckets: 28 },
  '30d': { bucketMs: DAY, buckets: 30 },
}

/**
 * How far a zone's wall clock is ahead of UTC at a given instant (DST included), in milliseconds. One
 * formatter serves every call: making an Intl.DateTimeFormat costs about a quarter of a millisecond,
 * and a 30-day chart asks 61 times (it was most of a stats call's time).
 */
function zoneOffsets(timeZone: string): (at: number) => number {
  const format = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
  })
  return (at) => {
    const parts: Record<string, number> = {}
    for (const p of format.formatToParts(at)) parts[p.type] = Number(p.value)
    const wall = Date.UTC(
      parts.year!,
      parts.month! - 1,
      parts.day!,
      parts.hour!,
      parts.minute!,
      parts.second!,
    )
    return wall - (at - (at % 1000))
  }
}

/** How far the event's wall clock is ahead of UTC at `at` (DST included), in milliseconds. */
export function zoneOffsetMs(timeZone: string, at: number): number {
  return zoneOffsets(timeZone)(at)
}

/**
 * Bucket boundaries on the event's wall clock (whole hours, local midnight), the last bucket holding
 * now; a day across a DST change is 23 or 25 hours long. Uses are counted by the database per
 * 5-minute slot, a grid on which every zone offset (whole, half or quarter hours) falls.
 */
export function bucketStarts(
  timeZone: string,
  now: number,
  { bucketMs, buckets }: { bucketMs: number; buckets: number },
) {
  const offset = zoneOffsets(timeZone)
  // The instant at which the wall clock shows `wall` (wall time written as UTC epoch ms).
  const wallToInstant = (wall: number) => wall - offset(wall - offset(wall))
  const current = Math.floor((now + offset(now)) / bucketMs) * bucketMs
  const starts = Array.from({ length: buckets }, (_, i) =>
    wallToInstant(current - (buckets - 1 - i) * bucketMs),
  )
  return { starts, to: wallToInstant(current + bucketMs) }
}

export async function findEvent({ db }: Pick<StatsDeps, 'db'>, eventId: number) {
  const event = await findEventSummary(db, eventId)
  if (!event) throw new NotFoundError('Event not found')
  return event
}

/**
 * The events a viewer may see, in name order, each with its ticket figures (the dashboard's list): the
 * event's for administrators, network managers and unbound dashboard users, only its partner's tickets
 * for a dashboard user bound to a partner.
 */
export async function eventsWithFigures(
  { db }: Pick<StatsDeps, 'db'>,
  viewer: Viewer,
  partnersOf: (eventId: number) => Promise<{ id: number; name: string }[]>,
) {
  const events = await visibleEvents(db, viewer)
  if (boundToPartner(viewer)) {
    const out = []
    for (const e of events) {
      const ids = visiblePartners(viewer, await partnersOf(e.id)).map((p) => p.id)
      const types = await ticketTypes(db, e.id, ids)
      const f = {
        issued: types.reduce((n, t) => n + t.issued, 0),
        used: types.reduce((n, t) => n + t.used, 0),
        revenue: types.reduce((n, t) => n + t.price * t.issued, 0),
      }
      out.push({ ...e, figures: { ...f, revenue: fromMinorUnits(f.revenue) } })
    }
    return out
  }
  // Counters per ticket type (migration 019): as fast with a million tickets as with ten.
  const figures = await eventListFigures(
    db,
    events.map((e) => e.id),
  )
  return events.map((e) => {
    const f = figures.get(e.id) ?? { issued: 0, used: 0, revenue: 0 }
    return { ...e, figures: { ...f, revenue: fromMinorUnits(f.revenue) } }
  })
}

/**
 * An event's ticket types (its catalogue, shared by its partners) with their figures: the event's from
 * the counters, or, given `partnerIds`, those of the partners' tickets alone (none given: zeros).
 */
async function ticketTypes(db: Db, eventId: number, partnerIds?: number[]) {
  const types = await ticketTypeFigures(db, eventId)
  if (partnerIds === undefined) return types
  const own = await partnerTicketFigures(db, eventId, partnerIds)
  const none = { issued: 0, claimed: 0, used: 0, balance: 0, promo_balance: 0 }
  return types.map((t) => ({ ...t, ...(own.get(t.id) ?? none) }))
}

/**
 * While a read of one event's figures for one range runs, further calls wait for the next read, which
 * starts when it ends and no sooner than this long after it started (see `sharedReads`).
 */
const STATS_MIN_INTERVAL_MS = 250

/**
 * `eventStats` shared by the callers of one app: a dashboard alone is answered at once, never from an
 * older read; any number of dashboards polling one event together cost a read or two every 250 ms, and
 * ticket use at the gate keeps its speed while they poll.
 */
export function sharedEventStats(deps: StatsDeps) {
  const shared = sharedReads<Static<typeof EventStats>>(STATS_MIN_INTERVAL_MS)
  return (eventId: number, range: Range, partnerIds?: number[]) =>
    shared(`${eventId} ${range} ${partnerIds?.join(',') ?? '*'}`, () =>
      eventStats(deps, eventId, range, partnerIds),
    )
}

/**
 * The figures of one event, as the page and the JSON API show them. Access is the caller's check.
 * Read from counters (migration 019), on one pooled connection one query after another: a dashboard's
 * poll never holds several of the connections that ticket use needs.
 */
export async function eventStats(
  deps: StatsDeps,
  eventId: number,
  range: Range,
  /** Only these partners' tickets, uses and deliveries (a dashboard user bound to a partner). */
  partnerIds?: number[],
): Promise<Static<typeof EventStats>> {
  const now = deps.clock.now()
  const read = await deps.db.connection().execute(async (db) => {
    const event = await findEvent({ db }, eventId)
    const { starts, to } = bucketStarts(event.timezone, now, RANGE_BUCKETS[range])
    const types = await ticketTypes(db, eventId, partnerIds)
    if (partnerIds === undefined)
      return {
        event,
        starts,
        to,
        types,
        perSlot: await usesPerSlot(db, eventId, starts[0]!, to),
        gates: await usesPerGate(db, eventId),
        webhook: await webhookHealth(db, eventId),
      }
    // The receiver and its last error are the partner's too: `figuresFor` puts them in.
    return {
      event,
      starts,
      to,
      types,
      perSlot: await partnerUsesPerSlot(db, eventId, partnerIds, SLOT_MS, starts[0]!, to),
      gates: byUses(await partnerUsesPerGate(db, eventId, partnerIds)),
      webhook: { hook: null, counts: await partnerDeliveryCounts(db, partnerIds), lastError: null },
    }
  })
  const { event, starts, to, types, perSlot, gates, webhook } = read
  const from = starts[0]!

  const counts = starts.map(() => 0)
  for (const [at, count] of perSlot) {
    let i = starts.length - 1
    while (i > 0 && starts[i]! > at) i--
    counts[i]! += count
  }
  const points = starts.map((start, i) => ({ t: start / 1000, count: counts[i]! }))
  const sum = (f: (t: (typeof types)[number]) => number) => types.reduce((n, t) => n + f(t), 0)
  const countOf = (status: string, tried?: number) =>
    webhook.counts
      .filter((c) => c.status === status && (tried === undefined || c.tried === tried))
      .reduce((n, c) => n + c.count, 0)
  const last = webhook.lastError

  return {
    event,
    generated_at: new Date(now).toISOString(),
    totals: {
      issued: sum((t) => t.issued),
      claimed: sum((t) => t.claimed),
      used: sum((t) => t.used),
      revenue: fromMinorUnits(sum((t) => t.price * t.issued)),
      balance_loaded: fromMinorUnits(sum((t) => t.balance)),
      promo_balance_loaded: fromMinorUnits(sum((t) => t.promo_balance)),
    },
    ticket_types: types.map((t) => ({
      ticket_uid: t.uid,
      name: t.name,
      ticket_date: t.ticket_date,
      price: fromMinorUnits(t.price),
      issued: t.issued,
      claimed: t.claimed,
      used: t.used,
      revenue: fromMinorUnits(t.price * t.issued),
    })),
    uses_over_time: {
      range,
      bucket_seconds: RANGE_BUCKETS[range].bucketMs / 1000,
      from: new Date(from).toISOString(),
      to: new Date(to).toISOString(),
      total: points.reduce((n, p) => n + p.count, 0),
      points,
    },
    uses_per_gate: gates,
    webhook: {
      configured: webhook.hook !== null,
      url: webhook.hook?.url ?? null,
      disabled: webhook.hook?.disabled_at != null,
      disabled_reason: webhook.hook?.disabled_reason ?? null,
      delivered: countOf('delivered'),
      pending: countOf('pending', 0),
      failing: countOf('pending', 1),
      failed: countOf('failed'),
      last_error: last ? lastErrorOf(last) : null,
    },
  }
}

/** A dashboard user bound to a partner: it sees that partner's figures only. */
function boundToPartner(viewer: Viewer): boolean {
  return viewer.partners !== 'all' && viewer.partners !== null
}

/**
 * The figures as one signed-in viewer may see them. Partners are isolated (decisions of 2026-11-29): a
 * dashboard user bound to a partner sees that partner's figures only (its tickets sold, claimed and
 * used, their revenue and balances, its uses over time and per gate, its deliveries, receiver and last
 * failed attempt); bound to a name the event has no partner of, zeros. Administrators, network managers
 * and dashboard users bound to no partner see the event's figures (the latter without any partner's
 * receiver).
 */
export async function figuresFor(
  { db }: Pick<StatsDeps, 'db'>,
  viewer: Viewer,
  eventId: number,
  range: Range,
  read: ReturnType<typeof sharedEventStats>,
  webhooks: WebhookDeliveries,
): Promise<Static<typeof EventStats>> {
  if (viewer.partners === 'all') return read(eventId, range)
  const partners = visiblePartners(viewer, await webhooks.partnersOf(eventId))
  const stats = boundToPartner(viewer)
    ? await read(
        eventId,
        range,
        partners.map((p) => p.id),
      )
    : await read(eventId, range)
  const [partner] = partners
  const hook = partner ? await webhooks.receiverOf(partner.id) : undefined
  const last = partner ? await lastFailedAttempt(db, { partnerId: partner.id }) : undefined
  return {
    ...stats,
    webhook: {
      ...stats.webhook,
      configured: hook !== undefined,
      url: hook?.url ?? null,
      disabled: hook?.disabled_at != null,
      disabled_reason: hook?.disabled_reason ?? null,
      last_error: last ? lastErrorOf(last) : null,
    },
  }
}

function lastErrorOf(last: { attempted_at: number; status_code: number | null; error: string | null }) {
  return {
    at: new Date(last.attempted_at).toISOString(),
    message: last.error ?? `receiver answered HTTP ${last.status_code}`,
  }
}
