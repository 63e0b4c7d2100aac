// The three-day festival of the check-in case table (test/helpers/checkin-cases.ts), set up on a test
// instance through HTTP: its ticket types, one ticket per name of the table, its lists.
import assert from 'node:assert/strict'
import { epochOfLocal } from '../../src/platform/formats.js'
import { login, type TestApp } from './app.js'
import {
  CHECKIN_LISTS,
  CHECKIN_TICKET_TYPES,
  CHECKIN_TICKETS,
  CHECKIN_TIMEZONE,
  type CheckinCounts,
  type CheckinExpected,
  type CheckinListKey,
  type CheckinTicket,
  type CheckinTicketType,
} from './checkin-cases.js'
import { partnerPost } from './partner.js'

export interface Festival {
  eventId: number
  /** Ticket type uids by key. */
  types: Record<CheckinTicketType, string>
  tickets: Record<CheckinTicket, { transfer_uid: string; company_ticket_id: string; code: string }>
  /** List ids by key (the default list's too). */
  lists: Record<CheckinListKey, number>
  /** An administrator's access token of the event, fresh at the clock's time. */
  admin(): Promise<string>
}

/** Moves the test clock to the instant an event-local time of the festival names. */
export function setLocalTime(t: TestApp, local: string): void {
  t.clock.advance(epochOfLocal(local, CHECKIN_TIMEZONE) - t.clock.now())
}

/**
 * A token of `email` that is fresh at the clock's time: signed in again once the clock moved on (the
 * timeline jumps days; access tokens last minutes).
 */
export function freshToken(t: TestApp, email: string, role: 'admin' | 'operator') {
  let token: string | undefined
  let at = 0
  return async () => {
    if (!token || Math.abs(t.clock.now() - at) > 5 * 60_000) {
      token = (await login(t, email, role)).access_token
      at = t.clock.now()
    }
    return token
  }
}

/**
 * The festival on event 1 (Europe/Berlin, as the table's zone) with the partner key `key`: set up on
 * 1 July 2027, before its scans. The clock is left there.
 */
export async function setUpFestival(t: TestApp, key: string): Promise<Festival> {
  setLocalTime(t, '2027-07-01T12:00:00')
  const types = {} as Festival['types']
  for (const [k, type] of Object.entries(CHECKIN_TICKET_TYPES)) {
    const res = await partnerPost(t, '/companies/ticket', key, { event_uid: 'summer-fest-2026', ...type })
    assert.equal(res.statusCode, 201, res.body)
    types[k as CheckinTicketType] = res.json().ticket_uid
  }
  const tickets = {} as Festival['tickets']
  for (const [name, type] of Object.entries(CHECKIN_TICKETS)) {
    const res = await partnerPost(t, '/companies/transfer', key, {
      event_uid: 'summer-fest-2026',
      email: `${name}@example.com`,
      ticket_uid: types[type],
      company_ticket_id: `festival-${name}-${Math.random().toString(36).slice(2)}`,
    })
    assert.equal(res.statusCode, 201, res.body)
    const { transfer_uid, company_ticket_id, ticket_code } = res.json()
    tickets[name as CheckinTicket] = { transfer_uid, company_ticket_id, code: ticket_code }
  }
  const admin = freshToken(t, 'ev1@example.com', 'admin')
  const lists = {} as Festival['lists']
  for (const [k, l] of Object.entries(CHECKIN_LISTS)) {
    const { ticket_types, ...rest } = l
    const res = await t.request({
      method: 'POST',
      url: '/events/1/checkin-lists',
      token: await admin(),
      payload: { ...rest, ticket_type_ids: ticket_types === null ? null : ticket_types.map((k) => types[k]) },
    })
    assert.equal(res.statusCode, 201, res.body)
    lists[k as CheckinListKey] = res.json().id
  }
  const all = await t.request({ method: 'GET', url: '/events/1/checkin-lists', token: await admin() })
  assert.equal(all.statusCode, 200, all.body)
  const byDefault = all.json().find((l: { is_default: boolean }) => l.is_default)
  lists.default = byDefault.id
  return { eventId: 1, types, tickets, lists, admin }
}

/** Every list's counts as GET /events/1/checkin-lists/{list_id}/status answers them at the clock's time. */
export async function festivalCounts(
  t: TestApp,
  f: Festival,
): Promise<Record<CheckinListKey, CheckinCounts>> {
  const out = {} as Record<CheckinListKey, CheckinCounts>
  for (const [key, id] of Object.entries(f.lists)) {
    const res = await t.request({
      method: 'GET',
      url: `/events/1/checkin-lists/${id}/status`,
      token: await f.admin(),
    })
    assert.equal(res.statusCode, 200, res.body)
    const { inside, entries, exits, counted_out, refused } = res.json()
    out[key as CheckinListKey] = { inside, entries, exits, counted_out, refused }
  }
  return out
}

/** What the case table expects, as a scanner answers it (VALID, REFUSED with its reason, ALREADY_USED). */
export function checkinOutcome(r: { status: string; reason?: string }): CheckinExpected | string {
  switch (r.status) {
    case 'VALID':
      return 'accepted'
    case 'REFUSED':
      return r.reason ?? 'REFUSED'
    case 'ALREADY_USED':
      return 'already_used'
    default:
      return r.status
  }
}
