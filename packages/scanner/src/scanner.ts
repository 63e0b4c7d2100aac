import { base64url, compactVerify, importJWK, type JWK } from 'jose'
import {
  type CheckinDirection,
  type CheckinRuleReason,
  type CheckinRules,
  decideCheckin,
  type PriorScan,
} from './checkin-rules.js'
import { LocalTime } from './local-time.js'
import {
  type CheckinList,
  KEY_CHARS,
  keyOf,
  type LocalScan,
  MemoryStorage,
  type QueuedScan,
  type ScannerMeta,
  type ScannerState,
  type ScannerStorage,
  type StoredScanner,
  type TicketState,
  type UsePatch,
} from './storage.js'

/**
 * Where a scan was decided, with a service that has check-in lists (and only then): the list's id and
 * the direction.
 */
export interface ScanPlace {
  checkin_list_id?: number
  direction?: CheckinDirection
}

/** What `scan(code)` answers, decided on the device alone. */
export type ScanResult =
  | ({ status: 'VALID'; transfer_uid: string; ticket_uid: string } & ScanPlace)
  | ({
      status: 'ALREADY_USED'
      transfer_uid: string
      /** Where the entry that stands in the way is known from: this device's scans or the service. */
      source: 'device' | 'service'
      /** When (UTC, ISO 8601): the ticket's use the service counted, or this device's entry on the list. */
      used_at: string | null
      /** Where: the gate of that entry, when known. */
      gate: string | null
    } & ScanPlace)
  | ({
      status: 'REFUSED'
      transfer_uid: string
      /** `product`: the ticket's type is not on the list; `invalid_time`: outside the list's windows. */
      reason: Exclude<CheckinRuleReason, 'already_used'>
    } & ScanPlace)
  | { status: 'REVOKED'; transfer_uid: string }
  | { status: 'EXPIRED'; transfer_uid: string }
  | { status: 'FORGED'; reason: string }
  | { status: 'WRONG_EVENT'; transfer_uid: string; event_id: number }

/** A scan the service counted as a second use: another device's scan reached it first. */
export interface Conflict {
  transfer_uid: string
  /** When this device scanned it (UTC, ISO 8601, on the clock corrected by the service's time). */
  scanned_at: string
  /** The first use the service counted (UTC, ISO 8601), the same form as `scanned_at`. */
  used_at: string | null
}

export interface SyncReport {
  /** Transfer uids of the scans uploaded and counted as the first use. */
  used: string[]
  conflicts: Conflict[]
  /**
   * Scans this device accepted that the service refused (NOT_FOUND, FORBIDDEN; REFUSED with its `reason`
   * when the list changed since the last sync): kept out of the queue, reported once.
   */
  rejected: { transfer_uid: string; status: string; reason?: string }[]
  /**
   * Uploads the service recorded with a flag: `clock_adjusted` (the scan time lay outside its window, or
   * before the ticket existed, and the service's time was recorded instead), `revoked_code` (a re-issued
   * code was scanned; it counts) or `unknown_code` (a code version the service never issued; it counts).
   */
  flagged: { transfer_uid: string; clock_adjusted?: true; revoked_code?: true; unknown_code?: true }[]
  /** The device clock's offset from the service's (ms, added to the device's time), as estimated now. */
  clockOffsetMs: number
  /** Tickets changed since the previous sync. */
  changes: number
  /** Whether the key set was fetched again. */
  keysFetched: boolean
}

export interface ScannerOptions {
  /** The service, e.g. https://auth.example.com */
  baseUrl: string
  eventId: number
  /** Bearer token with `ticket:scan` or `sync:download` + `sync:upload` (a device's offline token). */
  token: string | (() => string | Promise<string>)
  /** Gate recorded with each scan: 1 to 100 characters, no NUL (the service refuses others). */
  gate?: string
  /** The check-in list scans are on (an id of `checkinLists`); absent: the event's default list. */
  listId?: number
  /** `entry` (the default) or `exit`; exits need a service with check-in lists. */
  direction?: CheckinDirection
  /** Restores a state from `exportState()` (the in-memory storage). */
  state?: ScannerState
  /**
   * Where the state is kept instead of memory, e.g. `await openIndexedDbStorage()` in a browser: open
   * the scanner with `Scanner.open(options)` then.
   */
  storage?: ScannerStorage
  /** Time source in milliseconds (tests); Date.now by default. */
  now?: () => number
  fetch?: typeof fetch
  /**
   * The code digest (see codeDigest); WebCrypto by default, which works everywhere but hops to a thread
   * per call. `@wristband/scanner/node` passes node:crypto's synchronous hash, three times faster.
   */
  digest?: (code: string) => string | Promise<string>
}

/**
 * Why a call to the service failed: `network` (unreachable: offline, DNS, refused), `cors` (a browser
 * page whose origin the service does not allow: set CORS_ORIGINS), `http` (the service answered an error
 * status, in `status`).
 */
export type ScannerErrorKind = 'network' | 'cors' | 'http'

export class ScannerError extends Error {
  constructor(
    message: string,
    readonly status?: number,
    readonly kind: ScannerErrorKind = status === undefined ? 'network' : 'http',
  ) {
    super(message)
  }

  override readonly name = 'ScannerError'
}

/** What one scan may say beyond the code, instead of the scanner's options. */
export interface ScanOptions {
  /** The gate of this scan (the same rules as the scanner's `gate`). */
  gate?: string
  listId?: number
  direction?: CheckinDirection
}

/**
 * The rules of a service without check-in lists: the specification's single use (the rules of every
 * event's default list).
 */
const SINGLE_USE: CheckinRules = {
  ticket_type_ids: null,
  allow_multiple_entries: false,
  allow_entry_after_exit: false,
  windows: null,
  exit_all_at: null,
}

/**
 * The service refuses an upload whose gate is not 1 to 100 characters or holds a NUL, as a whole: every
 * sync would be refused and the scans stay queued. Such a gate is refused here, before any scan.
 */
function checkGate(gate: string | undefined): void {
  if (gate !== undefined && ([...gate].length < 1 || [...gate].length > 100 || gate.includes('\0')))
    throw new TypeError('gate must be 1 to 100 characters, without NUL (U+0000)')
}

/**
 * The JOSE `typ` of ticket codes (codes issued before it existed have none). The service's edge key also
 * signs offline tokens, with another `typ`: a token is never taken for a code.
 */
const TICKET_CODE_TYP = 'wb-ticket'

const BATCH = 500
const encoder = new TextEncoder()

/** The first 128 bits of SHA-256 of the code, base64url: what the sync feed gives per ticket. */
export async function codeDigest(code: string): Promise<string> {
  const hash = await globalThis.crypto.subtle.digest('SHA-256', encoder.encode(code))
  return base64url.encode(new Uint8Array(hash)).slice(0, 22)
}

const DIGEST_CHARS = 22

/** A page of the scan-sync feed: the compact encoding this scanner asks for, or the object form. */
type FeedPage = {
  key_ids: string[]
  cursor: string
  has_more: boolean
  /** From a service with check-in lists: the event's time zone and its lists as they are now. */
  timezone?: string
  checkin_lists?: CheckinList[]
} & (
  | {
      format: 'columns'
      count: number
      ids: string
      digests: string
      gates: string[]
      versions: [number, number][]
      used: [number, number, number][]
    }
  | {
      format?: undefined
      tickets: {
        transfer_uid: string
        version: number
        digest: string | null
        used_timestamp: string | null
        used_gate: string | null
      }[]
    }
)

/** The tickets of a feed page, keyed as the scanner keeps them. */
function* ticketsOf(page: FeedPage): Generator<[string, TicketState]> {
  if (page.format !== 'columns') {
    for (const t of page.tickets)
      yield [keyOf(t.transfer_uid), { v: t.version, d: t.digest, u: t.used_timestamp, g: t.used_gate }]
    return
  }
  const versions = new Map(page.versions)
  const used = new Map(page.used.map(([i, at, gate]) => [i, [at, gate] as const]))
  for (let i = 0; i < page.count; i++) {
    const digest = page.digests.slice(i * DIGEST_CHARS, (i + 1) * DIGEST_CHARS)
    const use = used.get(i)
    yield [
      page.ids.slice(i * KEY_CHARS, (i + 1) * KEY_CHARS),
      {
        v: versions.get(i) ?? 1,
        d: digest.startsWith('~') ? null : digest,
        u: use ? new Date(use[0]).toISOString() : null,
        g: use ? (page.gates[use[1]] ?? null) : null,
      },
    ]
  }
}

/** One answer of POST /tickets/use-batch. */
interface UploadResult {
  transfer_uid: string
  status: string
  used_timestamp?: string
  used_at?: string
  /** From a service with check-in lists: whether this accepted scan made the ticket USED. */
  first_use?: boolean
  reason?: string
  clock_adjusted?: true
  revoked_code?: true
  unknown_code?: true
}

/** The claims of a ticket code (its payload): the ones every code has, and any the service adds. */
export interface TicketCodeClaims {
  /** The event id. */
  e: number
  /** The transfer uid. */
  t: string
  /** The ticket type uid. */
  k: string
  /** The code's version (a re-issue increments it). */
  n: number
  /** The end of its validity window (seconds). */
  exp: number
  [claim: string]: unknown
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** Base64url text of UTF-8 JSON (a JOSE header or payload) to a value; throws when it is neither. */
function decodeJson(part: string): unknown {
  return JSON.parse(utf8.decode(base64url.decode(part)))
}

/**
 * What a code says, before any check (its payload, UTF-8 JSON, with the claims every code has): for
 * showing it. Whether it is genuine is `scan()`'s answer. Null for what is not a ticket code's form.
 */
export function readTicketCode(code: string): TicketCodeClaims | null {
  const first = code.indexOf('.')
  const second = code.indexOf('.', first + 1)
  if (first < 0 || second < 0 || code.indexOf('.', second + 1) >= 0 || code.length > 2048) return null
  try {
    const c = decodeJson(code.slice(first + 1, second)) as Partial<TicketCodeClaims> | null
    if (
      typeof c !== 'object' ||
      c === null ||
      typeof c.e !== 'number' ||
      typeof c.t !== 'string' ||
      typeof c.k !== 'string' ||
      typeof c.n !== 'number' ||
      typeof c.exp !== 'number'
    )
      return null
    return c as TicketCodeClaims
  } catch {
    return null
  }
}

/** The key id of a code's header, 'not a code' for another `typ` (an offline token), or null. */
function kidOf(code: string): string | null | 'not a code' {
  try {
    const header = decodeJson(code.slice(0, code.indexOf('.'))) as {
      alg?: unknown
      kid?: unknown
      typ?: unknown
    }
    if (header.typ !== undefined && header.typ !== TICKET_CODE_TYP) return 'not a code'
    return header.alg === 'EdDSA' && typeof header.kid === 'string' ? header.kid : null
  } catch {
    return null
  }
}

/**
 * An offline ticket scanner for one event. `sync()` (while online) uploads the queued scans and pulls
 * the changes of the event's tickets and the key set; `scan(code)` then answers from the device alone.
 * A presented code is genuine when its digest is the one the service synced for its ticket, or, for a
 * ticket issued after the last sync, when its Ed25519 signature checks against a key of the key set
 * (WebCrypto, in Node and in browsers that have Ed25519). Every VALID scan is queued for upload.
 */
export class Scanner {
  private readonly opts: ScannerOptions
  private readonly now: () => number
  private readonly fetchFn: typeof fetch
  private readonly digest: (code: string) => string | Promise<string>
  private readonly storage: ScannerStorage
  private cursor: string | null
  private jwks: JWK[]
  private readonly keys = new Map<string, ReturnType<typeof importJWK>>()
  /** The scans not yet uploaded, as the storage holds them (kept here too: uploads read them). */
  private queue: QueuedScan[]
  private knownCount: number
  /** Added to the device's time: the service's time as estimated from its Date header at each sync. */
  private clockOffsetMs: number
  /** The event's time zone and check-in lists, from the feed (undefined from a service without lists). */
  private timezone: string | undefined
  private lists: CheckinList[] | undefined
  /** Formats instants as the event's local time (made once per zone: Intl formatters are costly to make). */
  private zoneTime: LocalTime | undefined
  /** Random bytes for the scans' nonces, drawn 4 KiB at a time (a draw per scan cost a sixth of one). */
  private readonly nonces = new NoncePool()
  /**
   * The storage is read and written by one step at a time (a scan, a feed page, an upload's answer), so
   * two scans of one code at once cannot both find it unused, and a sync never overwrites a scan.
   */
  private turn: Promise<unknown> = Promise.resolve()
  private syncing: Promise<SyncReport> | undefined

  /**
   * A scanner whose state is in storage (IndexedDB in a browser): reads what it holds first. A storage
   * that holds another event's state is refused (ScannerError).
   */
  static async open(opts: ScannerOptions & { storage: ScannerStorage }): Promise<Scanner> {
    return new Scanner(opts, await opts.storage.load())
  }

  /** An in-memory scanner (`state` restores one from `exportState()`); `Scanner.open` for a storage. */
  constructor(opts: ScannerOptions, stored?: StoredScanner) {
    this.opts = opts
    this.now = opts.now ?? Date.now
    this.fetchFn = opts.fetch ?? globalThis.fetch.bind(globalThis)
    this.digest = opts.digest ?? codeDigest
    checkGate(opts.gate)
    if (opts.storage && !stored)
      throw new TypeError('a scanner with a storage is opened with `await Scanner.open(options)`')
    const memory = opts.storage ? undefined : new MemoryStorage(opts.state)
    this.storage = opts.storage ?? memory!
    const s = stored ?? memory!.loadNow()
    if (s.meta && s.meta.event_id !== opts.eventId)
      throw new ScannerError('The saved state is of another event')
    this.cursor = s.meta?.cursor ?? null
    this.jwks = s.meta?.keys ?? []
    this.queue = s.queue
    this.knownCount = s.known
    this.clockOffsetMs = s.meta?.clock_offset_ms ?? 0
    this.timezone = s.meta?.timezone
    this.lists = s.meta?.checkin_lists
    this.importKeys()
  }

  /** Runs `step` after every step started before it (see `turn`). */
  private inTurn<T>(step: () => Promise<T>): Promise<T> {
    const run = this.turn.then(step)
    this.turn = run.catch(() => {})
    return run
  }

  private meta(): ScannerMeta {
    return {
      event_id: this.opts.eventId,
      cursor: this.cursor,
      keys: this.jwks,
      clock_offset_ms: this.clockOffsetMs,
      ...(this.timezone !== undefined ? { timezone: this.timezone } : {}),
      ...(this.lists !== undefined ? { checkin_lists: this.lists } : {}),
    }
  }

  /** The corrected time (ms): the device's clock plus the offset estimated at the last sync. */
  private correctedNow(): number {
    return this.now() + this.clockOffsetMs
  }

  /** Scans waiting for upload. */
  get pending(): number {
    return this.queue.length
  }

  /** Tickets known from the sync feed (and scanned before it knew them). */
  get known(): number {
    return this.knownCount
  }

  /** The whole state as JSON, to persist; only for an in-memory scanner (a storage keeps its own). */
  exportState(): ScannerState {
    if (!(this.storage instanceof MemoryStorage))
      throw new TypeError(
        'exportState() is for an in-memory scanner: this one keeps its state in its storage',
      )
    return this.storage.export(this.opts.eventId)
  }

  /** The event's check-in lists as last synced (empty from a service without lists). */
  get checkinLists(): readonly CheckinList[] {
    return this.lists ?? []
  }

  /**
   * Decides on a presented code offline, on the scanner's list and direction or those of `options`.
   * An accepted scan (VALID) is queued for upload and counts for the check-in rules from then on; with a
   * service that has check-in lists, a scan refused by them or a revoked code is queued too (the service
   * keeps refused scans: who, where, when, why). Throws TypeError for a list the scanner does not know.
   */
  scan(presented: string, options: ScanOptions = {}): Promise<ScanResult> {
    checkGate(options.gate)
    const how = {
      gate: options.gate ?? this.opts.gate,
      listId: options.listId ?? this.opts.listId,
      direction: options.direction ?? this.opts.direction ?? 'entry',
    }
    return this.inTurn(() => this.decide(presented.trim(), how))
  }

  /** The list a scan is on: undefined without lists; the default list when none is named. */
  private listOf(listId: number | undefined, direction: CheckinDirection): CheckinList | undefined {
    if (!this.lists) {
      if (listId !== undefined || direction !== 'entry')
        throw new TypeError('the service has no check-in lists (or the scanner has not synced yet)')
      return undefined
    }
    const list = this.lists.find((l) => (listId === undefined ? l.is_default : l.id === listId))
    if (!list) throw new TypeError(`no check-in list ${listId ?? '(default)'} at this event`)
    return list
  }

  private async decide(
    code: string,
    how: { gate: string | undefined; listId: number | undefined; direction: CheckinDirection },
  ): Promise<ScanResult> {
    const list = this.listOf(how.listId, how.direction)
    const claims = readTicketCode(code)
    if (!claims) return { status: 'FORGED', reason: 'not a ticket code' }
    const key = keyOf(claims.t)
    const { ticket: known, local } = await this.storage.read(key)
    // The digest the service synced vouches for the code; otherwise its signature must.
    const vouched = known?.d != null && known.d === (await this.digest(code))
    if (!vouched) {
      const kid = kidOf(code)
      if (kid === 'not a code') return { status: 'FORGED', reason: 'not a ticket code' }
      const jwk = kid === null ? undefined : this.keys.get(kid)
      if (!jwk) return { status: 'FORGED', reason: 'unknown key' }
      try {
        await compactVerify(code, await jwk, { algorithms: ['EdDSA'] })
      } catch {
        return { status: 'FORGED', reason: 'bad signature' }
      }
    }
    if (claims.e !== this.opts.eventId)
      return { status: 'WRONG_EVENT', transfer_uid: claims.t, event_id: claims.e }
    const now = this.correctedNow()
    const at = new Date(now).toISOString()
    const place: ScanPlace = list ? { checkin_list_id: list.id, direction: how.direction } : {}
    const queued: QueuedScan = {
      transfer_uid: claims.t,
      used_at: at,
      ...(how.gate !== undefined ? { access_gate: how.gate } : {}),
      version: claims.n,
      ...(list ? { ...place, nonce: this.nonces.next() } : {}),
    }
    /** A refusal is recorded for upload where the service keeps refused scans (it has lists). */
    const refuse = async (reason: string) => {
      if (!list) return
      await this.storage.recordScan(key, { ...queued, reason })
      this.queue.push({ ...queued, reason })
    }
    if (known && claims.n < known.v) {
      await refuse('revoked')
      return { status: 'REVOKED', transfer_uid: claims.t }
    }
    if (claims.exp * 1000 < now) return { status: 'EXPIRED', transfer_uid: claims.t }

    // This list's accepted scans: this device's, and the ticket's use the service reported where that
    // can only have been an entry on this list: the default list of an event without others (the feed
    // tells a ticket's first use, not on which list).
    const listKey = list && !list.is_default ? list.id : null
    const onlyList = !this.lists || this.lists.length === 1
    const serviceUse = listKey === null && onlyList && known?.u != null ? known.u : undefined
    const prior: PriorScan[] = []
    if (serviceUse !== undefined)
      prior.push({ direction: 'entry', at: this.localTime(Date.parse(serviceUse)) })
    const mine = local.filter((l) => l.list === listKey)
    for (const l of mine) prior.push({ direction: l.direction, at: this.localTime(Date.parse(l.at)) })
    const decision = decideCheckin(list ?? SINGLE_USE, claims.k, prior, how.direction, this.localTime(now))
    if (decision.accepted) {
      const scan: LocalScan = { at, gate: how.gate ?? null, list: listKey, direction: how.direction }
      // A ticket issued after the last sync is kept with its code's version: an older code is REVOKED.
      const ticket = known ? undefined : { v: claims.n, d: null, u: null, g: null }
      await this.storage.recordScan(key, queued, [...local, scan], ticket)
      this.queue.push(queued)
      if (!known) this.knownCount++
      return { status: 'VALID', transfer_uid: claims.t, ticket_uid: claims.k, ...place }
    }
    await refuse(decision.reason)
    if (decision.reason !== 'already_used')
      return { status: 'REFUSED', transfer_uid: claims.t, reason: decision.reason, ...place }
    // The entry in the way: the service's use, else this device's latest entry on the list.
    const entry = mine.findLast((l) => l.direction === 'entry')
    return {
      status: 'ALREADY_USED',
      transfer_uid: claims.t,
      ...(serviceUse !== undefined
        ? { source: 'service', used_at: serviceUse, gate: known?.g ?? null }
        : { source: 'device', used_at: entry?.at ?? null, gate: entry?.gate ?? null }),
      ...place,
    }
  }

  /**
   * An instant as the event's local time, `YYYY-MM-DDTHH:MM:SS`, which the check-in rules compare (a
   * service without lists gives no time zone; its single use compares no times, and UTC serves).
   */
  private localTime(ms: number): string {
    const timeZone = this.timezone
    if (timeZone === undefined) return new Date(ms).toISOString().slice(0, 19)
    if (this.zoneTime?.timeZone !== timeZone) this.zoneTime = new LocalTime(timeZone)
    return this.zoneTime.format(ms)
  }

  /**
   * Uploads the queued scans (the first scan the service processes counts: a later one comes back as a
   * conflict), then pulls the feed from the last cursor and the key set when its key ids changed.
   * Throws ScannerError when the service cannot be reached; nothing queued is lost then.
   */
  sync(): Promise<SyncReport> {
    // A sync asked for while one runs joins it: two would upload the same queue twice.
    this.syncing ??= this.syncOnce().finally(() => {
      this.syncing = undefined
    })
    return this.syncing
  }

  private async syncOnce(): Promise<SyncReport> {
    const report: SyncReport = {
      used: [],
      conflicts: [],
      rejected: [],
      flagged: [],
      changes: 0,
      keysFetched: false,
      clockOffsetMs: this.clockOffsetMs,
    }
    const clock = new OffsetEstimate()
    while (this.queue.length > 0) {
      const batch = this.queue.slice(0, BATCH)
      const body = (await this.call('POST', '/tickets/use-batch', { scans: batch }, clock)) as {
        results: UploadResult[]
      }
      const uses: [string, UsePatch][] = []
      body.results.forEach((r, i) => {
        const scan = batch[i]!
        // A refusal this device made offline is recorded as one by the service: nothing to report.
        if (scan.reason !== undefined) return
        const key = keyOf(r.transfer_uid)
        if (r.status === 'USED') {
          // The ticket's first use: every USED of a service without lists, `first_use` of one with them
          // (an exit, or an entry after the first, is accepted without being the first use).
          if (r.first_use !== false) {
            uses.push([
              key,
              { ...(r.used_at !== undefined ? { u: r.used_at } : {}), g: scan.access_gate ?? null },
            ])
            report.used.push(r.transfer_uid)
          }
          if (r.clock_adjusted || r.revoked_code || r.unknown_code)
            report.flagged.push({
              transfer_uid: r.transfer_uid,
              ...(r.clock_adjusted ? { clock_adjusted: true } : {}),
              ...(r.revoked_code ? { revoked_code: true } : {}),
              ...(r.unknown_code ? { unknown_code: true } : {}),
            })
        } else if (r.status === 'ALREADY_USED') {
          if (r.used_at !== undefined) uses.push([key, { u: r.used_at }])
          report.conflicts.push({
            transfer_uid: r.transfer_uid,
            scanned_at: scan.used_at,
            used_at: r.used_at ?? null,
          })
        } else
          report.rejected.push({
            transfer_uid: r.transfer_uid,
            status: r.status,
            ...(r.reason !== undefined ? { reason: r.reason } : {}),
          })
      })
      await this.inTurn(async () => {
        await this.storage.applyUploads(batch.length, uses)
        // Scans made during the upload were appended: only the uploaded ones leave.
        this.queue = this.queue.slice(batch.length)
      })
    }
    let keyIds: string[] = []
    for (;;) {
      // A first sync is a snapshot taken at some feed position, maybe shared with other scanners: its
      // last page hands out that position, and a delta from there follows at once.
      const inSnapshot = this.cursor === null || this.cursor.includes('.')
      const q = `?format=columns${this.cursor === null ? '' : `&cursor=${encodeURIComponent(this.cursor)}`}`
      const page = (await this.call(
        'GET',
        `/events/${this.opts.eventId}/scan-sync${q}`,
        undefined,
        clock,
      )) as FeedPage
      keyIds = page.key_ids
      await this.inTurn(async () => {
        this.cursor = page.cursor
        if (page.checkin_lists !== undefined) {
          this.lists = page.checkin_lists
          this.timezone = page.timezone
        }
        await this.storage.applyFeed(ticketsOf(page), this.meta())
      })
      report.changes += page.format === 'columns' ? page.count : page.tickets.length
      if (!page.has_more && !inSnapshot) break
    }
    const have = this.jwks.map((k) => k.kid).sort()
    if (keyIds.length !== have.length || [...keyIds].sort().some((k, i) => k !== have[i])) {
      this.jwks = (
        (await this.call('GET', '/.well-known/jwks.json', undefined, clock)) as { keys: JWK[] }
      ).keys
      this.importKeys()
      report.keysFetched = true
    }
    const offset = clock.offset()
    if (offset !== undefined) this.clockOffsetMs = offset
    report.clockOffsetMs = this.clockOffsetMs
    await this.inTurn(async () => {
      await this.storage.saveMeta(this.meta())
      this.knownCount = await this.storage.count()
    })
    return report
  }

  private importKeys(): void {
    this.keys.clear()
    for (const jwk of this.jwks) {
      if (typeof jwk.kid !== 'string') continue
      const imported = importJWK(jwk, 'EdDSA')
      // A key this platform cannot import (no Ed25519 in WebCrypto) fails its scans as unverifiable.
      imported.catch(() => {})
      this.keys.set(jwk.kid, imported)
    }
  }

  private async call(
    method: 'GET' | 'POST',
    path: string,
    body: unknown,
    clock: OffsetEstimate,
  ): Promise<unknown> {
    const token = typeof this.opts.token === 'function' ? await this.opts.token() : this.opts.token
    const url = `${this.opts.baseUrl.replace(/\/$/, '')}${path}`
    let res: Response
    const sent = this.now()
    try {
      res = await this.fetchFn(url, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
    } catch (err) {
      throw await this.unreachable(err as Error)
    }
    clock.sample(sent, this.now(), res.headers.get('date'))
    if (!res.ok) throw new ScannerError(`${method} ${path} answered ${res.status}`, res.status)
    return res.json()
  }

  /**
   * Names why the service could not be reached. A browser reports a CORS refusal and a network failure
   * alike (a TypeError); a no-cors request tells them apart: it goes through when the service is
   * reachable and only CORS stood in the way.
   */
  private async unreachable(err: Error): Promise<ScannerError> {
    const cause = (err as Error & { cause?: { code?: string; message?: string } }).cause
    const detail = cause?.code ?? cause?.message ?? err.message
    const page = (globalThis as { location?: { origin?: string } }).location?.origin
    const nav = (globalThis as { navigator?: { onLine?: boolean } }).navigator
    const origin = new URL(this.opts.baseUrl).origin
    if (page !== undefined && page !== origin && nav?.onLine !== false) {
      try {
        await this.fetchFn(`${origin}/.well-known/jwks.json`, { mode: 'no-cors' })
        return new ScannerError(
          `blocked by CORS: set CORS_ORIGINS on the service to allow ${page} (the service is reachable)`,
          undefined,
          'cors',
        )
      } catch {
        // Unreachable without CORS too: a network failure.
      }
    }
    return new ScannerError(`network unreachable: ${this.opts.baseUrl} (${detail})`, undefined, 'network')
  }
}

/**
 * The device clock's offset from the service's, from the Date headers of one sync's answers. A Date
 * header has whole seconds: the service's time at the answer lay in [date, date + 1 s), which, seen from
 * the device between sending and receiving, bounds the offset. Bounds of several answers are intersected
 * and the middle is taken (within half a second and half a round trip).
 */
const DATE_SLACK_MS = 1000

class OffsetEstimate {
  private low = Number.NEGATIVE_INFINITY
  private high = Number.POSITIVE_INFINITY
  private last: [number, number] | undefined

  sample(sent: number, received: number, date: string | null): void {
    const at = date === null ? Number.NaN : Date.parse(date)
    if (Number.isNaN(at)) return
    const low = at - received
    const high = at + 1000 - sent
    this.last = [low, high]
    this.low = Math.max(this.low, low)
    this.high = Math.min(this.high, high)
  }

  offset(): number | undefined {
    if (!this.last) return undefined
    // Bounds that do not meet: the device clock was set during the sync; the last answer decides.
    const [low, high] = this.low <= this.high ? [this.low, this.high] : this.last
    // A clock that agrees with the service's as far as a Date header can tell (give or take a second: a
    // server may cache its Date text for a second) is left alone.
    return low - DATE_SLACK_MS <= 0 && 0 <= high + DATE_SLACK_MS ? 0 : Math.round((low + high) / 2)
  }
}

/** 128 random bits, base64url: a scan's nonce, unique across devices without asking anyone. */
class NoncePool {
  private bytes = new Uint8Array(0)
  private at = 0

  next(): string {
    if (this.at === this.bytes.length) {
      this.bytes = globalThis.crypto.getRandomValues(new Uint8Array(4096))
      this.at = 0
    }
    this.at += 16
    return base64url.encode(this.bytes.subarray(this.at - 16, this.at))
  }
}
