import { base64url, compactVerify, importJWK, type JWK } from 'jose'

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

/** A scan recorded offline, waiting for upload through POST /tickets/use-batch. */
export interface QueuedScan {
  transfer_uid: string
  /** UTC, ISO 8601, on the corrected clock. */
  used_at: string
  access_gate?: string
  /** The scanned code's version: the service flags a scan of a re-issued one (`revoked_code`). */
  version?: number
}

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

interface TicketState {
  /** Version of the current code; lower ones are revoked. */
  v: number
  /** Digest of the current code (see codeDigest), null when the ticket has none. */
  d: string | null
  /** When the service counted the use (UTC, ISO 8601), and at which gate. */
  u: string | null
  g: string | null
  /** This device's scan (ISO) and gate, until the service's use is known. */
  lu?: string
  lg?: string | null
}

/** Everything a scanner keeps, as JSON, to persist between restarts (`exportState` / `state` option). */
export interface ScannerState {
  event_id: number
  cursor: string | null
  keys: JWK[]
  tickets: Record<string, TicketState>
  queue: QueuedScan[]
  /** The clock offset estimated at the last sync (ms), kept across restarts while offline. */
  clock_offset_ms?: number
}

export interface ScannerOptions {
  /** The service, e.g. https://auth.example.com */
  baseUrl: string
  eventId: number
  /** Bearer token with `ticket:scan` or `sync:download` + `sync:upload` (a device's offline token). */
  token: string | (() => string | Promise<string>)
  /** Gate recorded with each scan: 1 to 100 characters, no NUL (the service refuses others). */
  gate?: string
  /** Restores a state from `exportState()`. */
  state?: ScannerState
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

/** How tickets are keyed: the first 16 hex characters (64 bits) of the transfer uid, as the feed gives them. */
const KEY_CHARS = 16
const DIGEST_CHARS = 22
const keyOf = (transferUid: string) => transferUid.slice(0, KEY_CHARS)

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

interface CodeClaims {
  e: number
  t: string
  k: string
  n: number
  exp: number
}

/** Base64url text of ASCII JSON (what the service signs) to a value; atob is in browsers and Node. */
function decodeJson(part: string): unknown {
  return JSON.parse(atob(part.replace(/-/g, '+').replace(/_/g, '/')))
}

/** The claims of a code, before any check: only their shape. */
function claimsOf(code: string): CodeClaims | null {
  const first = code.indexOf('.')
  const second = code.indexOf('.', first + 1)
  if (first < 0 || second < 0 || code.indexOf('.', second + 1) >= 0 || code.length > 2048) return null
  try {
    const c = decodeJson(code.slice(first + 1, second)) as Partial<CodeClaims>
    if (
      typeof c.e !== 'number' ||
      typeof c.t !== 'string' ||
      typeof c.k !== 'string' ||
      typeof c.n !== 'number' ||
      typeof c.exp !== 'number'
    )
      return null
    return c as CodeClaims
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
  private cursor: string | null
  private jwks: JWK[]
  private readonly keys = new Map<string, ReturnType<typeof importJWK>>()
  private readonly tickets: Map<string, TicketState>
  private queue: QueuedScan[]
  /** Added to the device's time: the service's time as estimated from its Date header at each sync. */
  private clockOffsetMs: number

  constructor(opts: ScannerOptions) {
    this.opts = opts
    this.now = opts.now ?? Date.now
    this.fetchFn = opts.fetch ?? globalThis.fetch.bind(globalThis)
    this.digest = opts.digest ?? codeDigest
    // The service refuses an upload whose gate is not 1 to 100 characters or holds a NUL, as a whole:
    // every sync would be refused and the scans stay queued. Such a gate is refused here, at set-up.
    const gate = opts.gate
    if (gate !== undefined && ([...gate].length < 1 || [...gate].length > 100 || gate.includes('\0')))
      throw new TypeError('gate must be 1 to 100 characters, without NUL (U+0000)')
    const s = opts.state
    if (s && s.event_id !== opts.eventId) throw new ScannerError('The saved state is of another event')
    this.cursor = s?.cursor ?? null
    this.jwks = s?.keys ?? []
    // Keyed by the first 16 hex characters of the transfer uid (the feed's key); a state saved by an
    // earlier version keyed by the whole uid is read the same way.
    this.tickets = new Map(Object.entries(s?.tickets ?? {}).map(([uid, t]) => [keyOf(uid), t]))
    this.queue = [...(s?.queue ?? [])]
    this.clockOffsetMs = s?.clock_offset_ms ?? 0
    this.importKeys()
  }

  /** The corrected time (ms): the device's clock plus the offset estimated at the last sync. */
  private correctedNow(): number {
    return this.now() + this.clockOffsetMs
  }

  /** Scans waiting for upload. */
  get pending(): number {
    return this.queue.length
  }

  /** Tickets known from the sync feed. */
  get known(): number {
    return this.tickets.size
  }

  exportState(): ScannerState {
    return {
      event_id: this.opts.eventId,
      cursor: this.cursor,
      keys: this.jwks,
      tickets: Object.fromEntries(this.tickets),
      queue: [...this.queue],
      clock_offset_ms: this.clockOffsetMs,
    }
  }

  async scan(presented: string): Promise<ScanResult> {
    const code = presented.trim()
    const claims = claimsOf(code)
    if (!claims) return { status: 'FORGED', reason: 'not a ticket code' }
    const known = this.tickets.get(keyOf(claims.t))
    // The digest the service synced vouches for the code; otherwise its signature must.
    const vouched = known?.d != null && known.d === (await this.digest(code))
    if (!vouched) {
      const kid = kidOf(code)
      if (kid === 'not a code') return { status: 'FORGED', reason: 'not a ticket code' }
      const key = kid === null ? undefined : this.keys.get(kid)
      if (!key) return { status: 'FORGED', reason: 'unknown key' }
      try {
        await compactVerify(code, await key, { algorithms: ['EdDSA'] })
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
    if (known?.lu !== undefined)
      return {
        status: 'ALREADY_USED',
        transfer_uid: claims.t,
        source: 'device',
        used_at: known.lu,
        gate: known.lg ?? null,
      }
    const usedAt = new Date(now).toISOString()
    const state = known ?? { v: claims.n, d: null, u: null, g: null }
    state.lu = usedAt
    state.lg = this.opts.gate ?? null
    this.tickets.set(keyOf(claims.t), state)
    this.queue.push({
      transfer_uid: claims.t,
      used_at: usedAt,
      ...(this.opts.gate !== undefined ? { access_gate: this.opts.gate } : {}),
      version: claims.n,
    })
    return { status: 'VALID', transfer_uid: claims.t, ticket_uid: claims.k }
  }

  /**
   * Uploads the queued scans (the first scan the service processes counts: a later one comes back as a
   * conflict), then pulls the feed from the last cursor and the key set when its key ids changed.
   * Throws ScannerError when the service cannot be reached; nothing queued is lost then.
   */
  async sync(): Promise<SyncReport> {
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
        results: {
          transfer_uid: string
          status: string
          used_timestamp?: string
          used_at?: string
          clock_adjusted?: true
          revoked_code?: true
          unknown_code?: true
        }[]
      }
      body.results.forEach((r, i) => {
        const scan = batch[i]!
        const state = this.tickets.get(keyOf(r.transfer_uid))
        if (r.status === 'USED' || r.status === 'ALREADY_USED') {
          if (state) {
            state.u = r.used_at ?? state.u
            state.g = r.status === 'USED' ? (scan.access_gate ?? null) : state.g
          }
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
      this.queue = this.queue.slice(batch.length)
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
      for (const [key, next] of ticketsOf(page)) {
        const prev = this.tickets.get(key)
        // A scan not yet known to the service stays on record until it is.
        if (prev?.lu !== undefined && next.u === null) {
          next.lu = prev.lu
          next.lg = prev.lg ?? null
        }
        this.tickets.set(key, next)
      }
      report.changes += page.format === 'columns' ? page.count : page.tickets.length
      this.cursor = page.cursor
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
