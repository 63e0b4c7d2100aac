import { base64url, compactVerify, importJWK, type JWK } from 'jose'
import {
  KEY_CHARS,
  keyOf,
  type LocalUse,
  MemoryStorage,
  type QueuedScan,
  type ScannerMeta,
  type ScannerState,
  type ScannerStorage,
  type StoredScanner,
  type TicketState,
  type UsePatch,
} from './storage.js'

/** What `scan(code)` answers, decided on the device alone. */
export type ScanResult =
  | { status: 'VALID'; transfer_uid: string; ticket_uid: string }
  | {
      status: 'ALREADY_USED'
      transfer_uid: string
      /** Where the first use is known from: this device (not yet uploaded, or uploaded) or the service. */
      source: 'device' | 'service'
      /** When (UTC, ISO 8601): the use the service counted, or this device's scan. */
      used_at: string | null
      /** Where: the gate of the first use, when known. */
      gate: string | null
    }
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
  /** Scans the service refused (NOT_FOUND, FORBIDDEN): kept out of the queue, reported once. */
  rejected: { transfer_uid: string; status: string }[]
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
type FeedPage = { key_ids: string[]; cursor: string; has_more: boolean } & (
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
    // The service refuses an upload whose gate is not 1 to 100 characters or holds a NUL, as a whole:
    // every sync would be refused and the scans stay queued. Such a gate is refused here, at set-up.
    const gate = opts.gate
    if (gate !== undefined && ([...gate].length < 1 || [...gate].length > 100 || gate.includes('\0')))
      throw new TypeError('gate must be 1 to 100 characters, without NUL (U+0000)')
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

  scan(presented: string): Promise<ScanResult> {
    return this.inTurn(() => this.decide(presented.trim()))
  }

  private async decide(code: string): Promise<ScanResult> {
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
    if (known && claims.n < known.v) return { status: 'REVOKED', transfer_uid: claims.t }
    const now = this.correctedNow()
    if (claims.exp * 1000 < now) return { status: 'EXPIRED', transfer_uid: claims.t }
    if (known?.u != null)
      return {
        status: 'ALREADY_USED',
        transfer_uid: claims.t,
        source: 'service',
        used_at: known.u,
        gate: known.g,
      }
    if (local)
      return {
        status: 'ALREADY_USED',
        transfer_uid: claims.t,
        source: 'device',
        used_at: local.at,
        gate: local.gate,
      }
    const usedAt = new Date(now).toISOString()
    const queued: QueuedScan = {
      transfer_uid: claims.t,
      used_at: usedAt,
      ...(this.opts.gate !== undefined ? { access_gate: this.opts.gate } : {}),
      version: claims.n,
    }
    const use: LocalUse = { at: usedAt, gate: this.opts.gate ?? null }
    // A ticket issued after the last sync is kept with its code's version: an older code of it is REVOKED.
    await this.storage.recordScan(
      key,
      use,
      queued,
      known ? undefined : { v: claims.n, d: null, u: null, g: null },
    )
    this.queue.push(queued)
    if (!known) this.knownCount++
    return { status: 'VALID', transfer_uid: claims.t, ticket_uid: claims.k }
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
        if (r.status === 'USED' || r.status === 'ALREADY_USED') {
          const patch: UsePatch = r.used_at === undefined ? {} : { u: r.used_at }
          if (r.status === 'USED') patch.g = scan.access_gate ?? null
          uses.push([keyOf(r.transfer_uid), patch])
          if (r.status === 'USED') report.used.push(r.transfer_uid)
          else
            report.conflicts.push({
              transfer_uid: r.transfer_uid,
              scanned_at: scan.used_at,
              used_at: r.used_at ?? null,
            })
          if (r.status === 'USED' && (r.clock_adjusted || r.revoked_code || r.unknown_code))
            report.flagged.push({
              transfer_uid: r.transfer_uid,
              ...(r.clock_adjusted ? { clock_adjusted: true } : {}),
              ...(r.revoked_code ? { revoked_code: true } : {}),
              ...(r.unknown_code ? { unknown_code: true } : {}),
            })
        } else report.rejected.push({ transfer_uid: r.transfer_uid, status: r.status })
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
        this.knownCount = (await this.storage.applyFeed(ticketsOf(page), this.meta())).known
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
    await this.inTurn(() => this.storage.saveMeta(this.meta()))
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
