/**
 * The check-in cases: one table of scans over a three-day festival, run online by the service's test
 * (src/tickets/checkin-lists.test.ts, over HTTP on every backend) and offline by the scanner's, so the
 * service and the scanner are held to the same decisions (packages/scanner/src/checkin-rules.ts).
 *
 * The festival: Friday 16 to Sunday 18 July 2027, Europe/Berlin. Two areas: the camping (weekend tickets,
 * re-entry after exit allowed) and the main stage, with one list per day as pretix does it (each day's
 * doors; no re-entry; everyone counted out at 04:00). Besides them a lounge (any ticket, re-entry after an
 * exit, everyone counted out at 03:00), a food court (any ticket, as often as it likes) and the event's
 * default list (the specification's single use). Weekend tickets are for all three days, Saturday
 * tickets for Saturday's stage only.
 *
 * Every time is the event's local time (`YYYY-MM-DDTHH:MM:SS`). Scans are listed in time order, each on a
 * ticket named in `CHECKIN_TICKETS`; a runner keeps a ticket's scans in this order (scans of different
 * tickets do not affect each other, so the whole table can run as one timeline).
 */

export const CHECKIN_TIMEZONE = 'Europe/Berlin'

/** Ticket types: `ticket_date` as the partner API takes it (codes stay valid two days after it). */
export const CHECKIN_TICKET_TYPES = {
  weekend: { name: 'Weekend', price: 189, ticket_date: '2027-07-18T23:00:00.000' },
  saturday: { name: 'Saturday', price: 79, ticket_date: '2027-07-17T12:00:00.000' },
} as const

export type CheckinTicketType = keyof typeof CHECKIN_TICKET_TYPES

/** A list as POST /events/{event_id}/checkin-lists takes it, with ticket types named by key. */
export interface CheckinListCase {
  name: string
  /** null: every type. */
  ticket_types: CheckinTicketType[] | null
  allow_multiple_entries: boolean
  allow_entry_after_exit: boolean
  windows: { from: string; until: string }[] | null
  exit_all_at: string | null
}

export const CHECKIN_LISTS = {
  camping: {
    name: 'Camping',
    ticket_types: ['weekend'],
    allow_multiple_entries: false,
    allow_entry_after_exit: true,
    windows: [{ from: '2027-07-16T10:00:00', until: '2027-07-19T12:00:00' }],
    exit_all_at: null,
  },
  stage_fri: {
    name: 'Main stage, Friday',
    ticket_types: ['weekend'],
    allow_multiple_entries: false,
    allow_entry_after_exit: false,
    windows: [{ from: '2027-07-16T16:00:00', until: '2027-07-17T02:00:00' }],
    exit_all_at: '04:00',
  },
  stage_sat: {
    name: 'Main stage, Saturday',
    ticket_types: ['weekend', 'saturday'],
    allow_multiple_entries: false,
    allow_entry_after_exit: false,
    windows: [{ from: '2027-07-17T12:00:00', until: '2027-07-18T02:00:00' }],
    exit_all_at: '04:00',
  },
  stage_sun: {
    name: 'Main stage, Sunday',
    ticket_types: ['weekend'],
    allow_multiple_entries: false,
    allow_entry_after_exit: false,
    windows: [{ from: '2027-07-18T12:00:00', until: '2027-07-18T23:00:00' }],
    exit_all_at: '04:00',
  },
  lounge: {
    name: 'Lounge',
    ticket_types: null,
    allow_multiple_entries: false,
    allow_entry_after_exit: true,
    windows: null,
    exit_all_at: '03:00',
  },
  food: {
    name: 'Food court',
    ticket_types: null,
    allow_multiple_entries: true,
    allow_entry_after_exit: true,
    windows: null,
    exit_all_at: null,
  },
} satisfies Record<string, CheckinListCase>

/** A list of the table: one created from CHECKIN_LISTS, or the event's default list. */
export type CheckinListKey = keyof typeof CHECKIN_LISTS | 'default'

/** The event's default list, as the service answers it: the specification's single use. */
export const DEFAULT_LIST_RULES = {
  ticket_type_ids: null,
  allow_multiple_entries: false,
  allow_entry_after_exit: false,
  windows: null,
  exit_all_at: null,
} as const

/** The tickets of the table by name, with their type. */
export const CHECKIN_TICKETS = {
  /** The specification's flow on the default list. */
  spec: 'weekend',
  /** A weekend ticket at each day's stage. */
  weekender: 'weekend',
  /** A Saturday ticket tried on every day. */
  saturday: 'saturday',
  /** A camper going in and out. */
  camper: 'weekend',
  /** The stage's door times, to the second. */
  doors: 'weekend',
  /** The lounge, whose guests are counted out at 03:00. */
  lounger: 'weekend',
  /** The food court, as often as it likes. */
  eater: 'weekend',
  /** Exits of a ticket that never entered there. */
  leaver: 'saturday',
  /** Entries on several lists: the first makes the ticket USED, once. */
  roamer: 'weekend',
  /** Refused entries leave a ticket unused. */
  refused: 'saturday',
} as const satisfies Record<string, CheckinTicketType>

export type CheckinTicket = keyof typeof CHECKIN_TICKETS

/** A refusal the rule decides (the service adds others: unknown, wrong_event, revoked, error). */
export type CheckinExpected = 'accepted' | 'product' | 'invalid_time' | 'already_used'

export interface CheckinScanCase {
  at: string
  ticket: CheckinTicket
  list: CheckinListKey
  direction: 'entry' | 'exit'
  expect: CheckinExpected
  /** This accepted entry is the ticket's first: it becomes USED and its partner is notified (once). */
  first_use?: true
}

const scan = (
  at: string,
  ticket: CheckinTicket,
  list: CheckinListKey,
  direction: 'entry' | 'exit',
  expect: CheckinExpected,
  first?: 'first use',
): CheckinScanCase => ({ at, ticket, list, direction, expect, ...(first ? { first_use: true } : {}) })

/** Every scan, in time order. */
export const CHECKIN_SCANS: readonly CheckinScanCase[] = [
  // Friday
  scan('2027-07-16T09:00:00', 'leaver', 'camping', 'exit', 'accepted'), // exits are always accepted
  scan('2027-07-16T10:00:00', 'camper', 'camping', 'entry', 'accepted', 'first use'),
  scan('2027-07-16T11:00:00', 'camper', 'camping', 'entry', 'already_used'), // inside, no exit yet
  scan('2027-07-16T12:00:00', 'roamer', 'camping', 'entry', 'accepted', 'first use'),
  scan('2027-07-16T12:00:00', 'eater', 'food', 'entry', 'accepted', 'first use'),
  scan('2027-07-16T12:01:00', 'eater', 'food', 'entry', 'accepted'), // multiple entries
  scan('2027-07-16T13:00:00', 'eater', 'food', 'entry', 'accepted'),
  scan('2027-07-16T14:00:00', 'eater', 'food', 'exit', 'accepted'),
  scan('2027-07-16T14:01:00', 'eater', 'food', 'entry', 'accepted'),
  scan('2027-07-16T15:00:00', 'camper', 'camping', 'exit', 'accepted'),
  scan('2027-07-16T15:59:59', 'doors', 'stage_fri', 'entry', 'invalid_time'), // a second before the doors
  scan('2027-07-16T17:00:00', 'spec', 'default', 'entry', 'accepted', 'first use'),
  scan('2027-07-16T17:05:00', 'spec', 'default', 'entry', 'already_used'),
  scan('2027-07-16T18:00:00', 'spec', 'default', 'exit', 'accepted'),
  scan('2027-07-16T18:00:00', 'weekender', 'stage_fri', 'entry', 'accepted', 'first use'),
  scan('2027-07-16T18:10:00', 'spec', 'default', 'entry', 'already_used'), // the default list: one entry
  scan('2027-07-16T18:30:00', 'roamer', 'stage_fri', 'entry', 'accepted'), // used already, first here
  scan('2027-07-16T19:00:00', 'saturday', 'stage_fri', 'entry', 'product'),
  scan('2027-07-16T19:00:00', 'roamer', 'default', 'entry', 'accepted'),
  scan('2027-07-16T19:30:00', 'refused', 'stage_fri', 'entry', 'product'),
  scan('2027-07-16T19:31:00', 'refused', 'camping', 'entry', 'product'),
  scan('2027-07-16T20:00:00', 'leaver', 'stage_fri', 'exit', 'accepted'), // not its type: exits still count
  scan('2027-07-16T20:30:00', 'leaver', 'default', 'entry', 'accepted', 'first use'), // exits use nothing
  scan('2027-07-16T21:00:00', 'weekender', 'stage_fri', 'entry', 'already_used'),
  scan('2027-07-16T22:00:00', 'weekender', 'stage_fri', 'exit', 'accepted'),
  scan('2027-07-16T22:00:00', 'lounger', 'lounge', 'entry', 'accepted', 'first use'),
  scan('2027-07-16T22:30:00', 'weekender', 'stage_fri', 'entry', 'already_used'), // no re-entry at the stage
  scan('2027-07-16T23:00:00', 'camper', 'camping', 'entry', 'accepted'), // re-entry after the exit
  // Saturday
  scan('2027-07-17T02:00:00', 'doors', 'stage_fri', 'entry', 'accepted', 'first use'), // `until` included
  scan('2027-07-17T02:59:00', 'lounger', 'lounge', 'entry', 'already_used'), // still inside
  scan('2027-07-17T03:00:00', 'lounger', 'lounge', 'entry', 'accepted'), // counted out at 03:00
  scan('2027-07-17T09:00:00', 'camper', 'camping', 'exit', 'accepted'),
  scan('2027-07-17T10:00:00', 'camper', 'camping', 'entry', 'accepted'),
  scan('2027-07-17T11:30:00', 'saturday', 'stage_sat', 'entry', 'invalid_time'),
  scan('2027-07-17T11:59:00', 'doors', 'stage_sat', 'entry', 'invalid_time'),
  scan('2027-07-17T12:00:00', 'saturday', 'stage_sat', 'entry', 'accepted', 'first use'), // `from` included
  scan('2027-07-17T13:00:00', 'weekender', 'stage_sat', 'entry', 'accepted'), // a new day's list
  scan('2027-07-17T14:00:00', 'saturday', 'camping', 'entry', 'product'),
  scan('2027-07-17T15:00:00', 'refused', 'stage_sat', 'entry', 'accepted', 'first use'),
  scan('2027-07-17T20:00:00', 'lounger', 'lounge', 'entry', 'already_used'),
  // Sunday
  scan('2027-07-18T03:30:00', 'lounger', 'lounge', 'entry', 'accepted'),
  scan('2027-07-18T12:30:00', 'weekender', 'stage_sun', 'entry', 'accepted'),
  scan('2027-07-18T13:00:00', 'saturday', 'stage_sun', 'entry', 'product'),
  // Monday: the camping closed at noon
  scan('2027-07-19T12:00:01', 'camper', 'camping', 'entry', 'invalid_time'),
]

/** What GET /events/{event_id}/checkin-lists/{list_id}/status answers (`refused`: the reasons met only). */
export interface CheckinCounts {
  inside: number
  entries: number
  exits: number
  counted_out: number
  refused: Partial<Record<'product' | 'invalid_time' | 'already_used', number>>
}

/**
 * The counts of each list at moments of the timeline, after every scan up to `at` and every count-out
 * by `exit_all_at` up to it. Worked out by hand from the scans above.
 */
export const CHECKIN_CHECKPOINTS: readonly { at: string; counts: Record<CheckinListKey, CheckinCounts> }[] = [
  {
    // Friday night: nobody counted out yet.
    at: '2027-07-16T23:30:00',
    counts: {
      camping: { inside: 2, entries: 3, exits: 2, counted_out: 0, refused: { already_used: 1, product: 1 } },
      stage_fri: {
        inside: 1,
        entries: 2,
        exits: 2,
        counted_out: 0,
        refused: { invalid_time: 1, product: 2, already_used: 2 },
      },
      stage_sat: { inside: 0, entries: 0, exits: 0, counted_out: 0, refused: {} },
      stage_sun: { inside: 0, entries: 0, exits: 0, counted_out: 0, refused: {} },
      lounge: { inside: 1, entries: 1, exits: 0, counted_out: 0, refused: {} },
      food: { inside: 1, entries: 4, exits: 1, counted_out: 0, refused: {} },
      default: { inside: 2, entries: 3, exits: 1, counted_out: 0, refused: { already_used: 2 } },
    },
  },
  {
    // Saturday 04:30: the stage counted its two guests out at 04:00, the lounge its one at 03:00 (who
    // came in again at once).
    at: '2027-07-17T04:30:00',
    counts: {
      camping: { inside: 2, entries: 3, exits: 2, counted_out: 0, refused: { already_used: 1, product: 1 } },
      stage_fri: {
        inside: 0,
        entries: 3,
        exits: 2,
        counted_out: 2,
        refused: { invalid_time: 1, product: 2, already_used: 2 },
      },
      stage_sat: { inside: 0, entries: 0, exits: 0, counted_out: 0, refused: {} },
      stage_sun: { inside: 0, entries: 0, exits: 0, counted_out: 0, refused: {} },
      lounge: { inside: 1, entries: 2, exits: 0, counted_out: 1, refused: { already_used: 1 } },
      food: { inside: 1, entries: 4, exits: 1, counted_out: 0, refused: {} },
      default: { inside: 2, entries: 3, exits: 1, counted_out: 0, refused: { already_used: 2 } },
    },
  },
  {
    // Monday afternoon, the festival over.
    at: '2027-07-19T13:00:00',
    counts: {
      camping: {
        inside: 2,
        entries: 4,
        exits: 3,
        counted_out: 0,
        refused: { already_used: 1, product: 2, invalid_time: 1 },
      },
      stage_fri: {
        inside: 0,
        entries: 3,
        exits: 2,
        counted_out: 2,
        refused: { invalid_time: 1, product: 2, already_used: 2 },
      },
      stage_sat: { inside: 0, entries: 3, exits: 0, counted_out: 3, refused: { invalid_time: 2 } },
      stage_sun: { inside: 0, entries: 1, exits: 0, counted_out: 1, refused: { product: 1 } },
      lounge: { inside: 0, entries: 3, exits: 0, counted_out: 3, refused: { already_used: 2 } },
      food: { inside: 1, entries: 4, exits: 1, counted_out: 0, refused: {} },
      default: { inside: 2, entries: 3, exits: 1, counted_out: 0, refused: { already_used: 2 } },
    },
  },
]
