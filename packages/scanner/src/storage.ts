import type { JWK } from 'jose'
import type { CheckinDirection, CheckinRules } from './checkin-rules.js'

/** What the sync feed says of one ticket, keyed by the first 16 hex characters of its transfer uid. */
export interface TicketState {
  /** Version of the current code; lower ones are revoked. */
  v: number
  /** Digest of the current code (see codeDigest), null when the ticket has none. */
  d: string | null
  /** When the service counted the use (UTC, ISO 8601), and at which gate. */
  u: string | null
  g: string | null
}

/** A scan this device accepted (an entry or an exit): what the check-in rules count offline. */
export interface LocalScan {
  /** When (UTC, ISO 8601, on the corrected clock). */
  at: string
  gate: string | null
  /** The check-in list; null: the event's default list (and every scan of a service without lists). */
  list: number | null
  direction: CheckinDirection
}

/** A scan recorded offline, waiting for upload through POST /tickets/use-batch. */
export interface QueuedScan {
  transfer_uid: string
  /** UTC, ISO 8601, on the corrected clock. */
  used_at: string
  access_gate?: string
  /** The scanned code's version: the service flags a scan of a re-issued one (`revoked_code`). */
  version?: number
  /** With a service that has check-in lists: the list and direction, and a nonce unique to the scan. */
  checkin_list_id?: number
  direction?: CheckinDirection
  /** An upload sent again (its answer lost) under the same nonces counts nothing twice. */
  nonce?: string
  /** The device refused the scan offline, for this reason: the service records it as refused. */
  reason?: string
}

/** The first use of a ticket as an upload's answer gave it: when, and where when it was this device's. */
export type UsePatch = Partial<Pick<TicketState, 'u' | 'g'>>

/** A check-in list as the sync feed gives it: what the scanner applies offline. */
export interface CheckinList extends CheckinRules {
  id: number
  name: string
  is_default: boolean
}

/** The small part of a scanner's state, saved whole. */
export interface ScannerMeta {
  event_id: number
  /** The feed position the tickets are synced to; null before the first sync. */
  cursor: string | null
  /** The service's JWK Set as last fetched. */
  keys: JWK[]
  /** The clock offset estimated at the last sync (ms), kept across restarts while offline. */
  clock_offset_ms: number
  /** The event's time zone (IANA) and check-in lists, from the feed; absent from a service without lists. */
  timezone?: string
  checkin_lists?: CheckinList[]
}

/** What a storage holds when a scanner opens it. */
export interface StoredScanner {
  /** Undefined for an empty storage (a new device). */
  meta: ScannerMeta | undefined
  /** The scans not yet uploaded, in the order they were made. */
  queue: QueuedScan[]
  /** Tickets known. */
  known: number
}

/**
 * Where a scanner keeps its state. The scanner calls one method at a time (never two at once), and each
 * must be durable when its promise resolves: a scan answered VALID is on record before it is answered,
 * and a feed page is kept with the cursor after it, so a restart neither loses a scan nor skips a change.
 * `@wristband/scanner` brings two: the in-memory state (`exportState()` / `state`, the default) and
 * IndexedDB for browsers (`openIndexedDbStorage`).
 */
export interface ScannerStorage {
  load(): Promise<StoredScanner>
  /** One ticket: the feed's state and the scans this device accepted of it (oldest first). */
  read(key: string): Promise<{ ticket: TicketState | undefined; local: LocalScan[] }>
  /**
   * A scan decided offline: its queued upload and, for an accepted one, the ticket's accepted scans with
   * it (`local`, the whole list), together; `ticket` when the ticket was not synced yet (its code's
   * version, so an older code of it is REVOKED).
   */
  recordScan(key: string, queued: QueuedScan, local?: LocalScan[], ticket?: TicketState): Promise<void>
  /** A feed page: the tickets' states (whole, replacing what was known) and the cursor after them. */
  applyFeed(tickets: Iterable<[string, TicketState]>, meta: ScannerMeta): Promise<void>
  /** Tickets known (asked once a sync is done: counting half a million records takes a while). */
  count(): Promise<number>
  /**
   * After an upload: the first `count` queued scans are done; `uses` what the service answered of the
   * tickets' first uses (applied to tickets known, others left alone).
   */
  applyUploads(count: number, uses: [string, UsePatch][]): Promise<void>
  saveMeta(meta: ScannerMeta): Promise<void>
}

/** How tickets are keyed: the first 16 hex characters (64 bits) of the transfer uid, as the feed gives them. */
export const KEY_CHARS = 16
export const keyOf = (transferUid: string) => transferUid.slice(0, KEY_CHARS)

/**
 * Everything a scanner keeps, as JSON (`exportState()` / `state` option): what earlier versions kept in
 * `localStorage` too, so it is also what `openIndexedDbStorage` imports from there.
 */
export interface ScannerState {
  event_id: number
  cursor: string | null
  keys: JWK[]
  /**
   * The feed's tickets, with the scans this device accepted (`ls`; a state saved before check-in lists
   * has this device's one use as `lu`, `lg`).
   */
  tickets: Record<string, TicketState & { ls?: LocalScan[]; lu?: string; lg?: string | null }>
  queue: QueuedScan[]
  clock_offset_ms?: number
  timezone?: string
  checkin_lists?: CheckinList[]
}

/** A ScannerState's parts as a storage keeps them (a state saved by an earlier version is read the same). */
export function splitState(s: ScannerState): {
  meta: ScannerMeta
  tickets: [string, TicketState][]
  local: [string, LocalScan[]][]
  queue: QueuedScan[]
} {
  const tickets: [string, TicketState][] = []
  const local: [string, LocalScan[]][] = []
  for (const [uid, t] of Object.entries(s.tickets)) {
    // Keyed by the first 16 hex characters; a state saved by an earlier version keyed by the whole uid
    // is read the same way.
    const key = keyOf(uid)
    tickets.push([key, { v: t.v, d: t.d, u: t.u, g: t.g }])
    if (t.ls) local.push([key, t.ls])
    // This device's use, as a state saved before check-in lists has it: an entry on the default list.
    else if (t.lu !== undefined)
      local.push([key, [{ at: t.lu, gate: t.lg ?? null, list: null, direction: 'entry' }]])
  }
  return {
    meta: {
      event_id: s.event_id,
      cursor: s.cursor,
      keys: s.keys,
      clock_offset_ms: s.clock_offset_ms ?? 0,
      ...(s.timezone !== undefined ? { timezone: s.timezone } : {}),
      ...(s.checkin_lists !== undefined ? { checkin_lists: s.checkin_lists } : {}),
    },
    tickets,
    local,
    queue: [...s.queue],
  }
}

/** The state in memory, saved by the application as JSON (`exportState()`): the default storage. */
export class MemoryStorage implements ScannerStorage {
  private meta: ScannerMeta | undefined
  private readonly tickets = new Map<string, TicketState>()
  private readonly local = new Map<string, LocalScan[]>()
  private queue: QueuedScan[] = []

  constructor(state?: ScannerState) {
    if (!state) return
    const parts = splitState(state)
    this.meta = parts.meta
    for (const [key, t] of parts.tickets) this.tickets.set(key, t)
    for (const [key, l] of parts.local) this.local.set(key, l)
    this.queue = parts.queue
  }

  /** load(), synchronously: `new Scanner({ state })` opens at once. */
  loadNow(): StoredScanner {
    return { meta: this.meta, queue: [...this.queue], known: this.tickets.size }
  }

  async load(): Promise<StoredScanner> {
    return this.loadNow()
  }

  async read(key: string) {
    return { ticket: this.tickets.get(key), local: this.local.get(key) ?? [] }
  }

  async recordScan(key: string, queued: QueuedScan, local?: LocalScan[], ticket?: TicketState) {
    if (ticket) this.tickets.set(key, ticket)
    if (local) this.local.set(key, local)
    this.queue.push(queued)
  }

  async applyFeed(tickets: Iterable<[string, TicketState]>, meta: ScannerMeta) {
    for (const [key, t] of tickets) this.tickets.set(key, t)
    this.meta = meta
  }

  async count() {
    return this.tickets.size
  }

  async applyUploads(count: number, uses: [string, UsePatch][]) {
    this.queue = this.queue.slice(count)
    for (const [key, use] of uses) {
      const t = this.tickets.get(key)
      if (t) this.tickets.set(key, { ...t, ...use })
    }
  }

  async saveMeta(meta: ScannerMeta) {
    this.meta = meta
  }

  /** The whole state as JSON. */
  export(eventId: number): ScannerState {
    const tickets: ScannerState['tickets'] = {}
    for (const [key, t] of this.tickets) tickets[key] = t
    for (const [key, ls] of this.local) {
      const t = tickets[key]
      // A local scan without a ticket cannot be: a scan of an unsynced ticket records the ticket too.
      if (t) tickets[key] = { ...t, ls }
    }
    const meta = this.meta ?? { event_id: eventId, cursor: null, keys: [], clock_offset_ms: 0 }
    return { ...meta, tickets, queue: [...this.queue] }
  }
}
