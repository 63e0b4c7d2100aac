import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto'
import fs from 'node:fs'
import { isIP } from 'node:net'
import path from 'node:path'
import { EXIT_STATUS, type ExitStatus } from './startup.js'
import { tracingRequested } from './tracing.js'

/**
 * Every setting of the service, declared once: the parser validates it at start and the README's
 * configuration table is generated from the same list (scripts/config-doc.ts).
 */
type Parser<T> = (raw: string) => T

interface Setting<T, D extends string | undefined = string | undefined> {
  description: string
  /** The default as a user would write it in the environment; undefined means "unset". */
  default: D
  parse: Parser<T>
}

function setting<T, D extends string | undefined>(
  description: string,
  def: D,
  parse: Parser<T>,
): Setting<T, D> {
  return { description, default: def, parse }
}

const text: Parser<string> = (raw) => raw

function integer(min: number, max: number = Number.MAX_SAFE_INTEGER): Parser<number> {
  return (raw) => {
    if (!/^-?\d+$/.test(raw.trim())) throw new Error(`must be a whole number, got "${raw}"`)
    const n = Number(raw)
    if (n < min || n > max) throw new Error(`must be between ${min} and ${max}, got ${n}`)
    return n
  }
}

const bool: Parser<boolean> = (raw) => {
  const v = raw.trim().toLowerCase()
  if (['1', 'true', 'yes', 'on'].includes(v)) return true
  if (['0', 'false', 'no', 'off'].includes(v)) return false
  throw new Error(`must be true or false, got "${raw}"`)
}

function oneOf<T extends string>(...values: T[]): Parser<T> {
  return (raw) => {
    if (!values.includes(raw as T)) throw new Error(`must be one of ${values.join(', ')}, got "${raw}"`)
    return raw as T
  }
}

/** A problem of one setting that is refused with its own exit status (a plain Error is `setting`). */
class Refusal extends Error {
  constructor(
    message: string,
    readonly status: ExitStatus,
  ) {
    super(message)
  }
}

/**
 * A URL of one of `schemes` (`['redis:', 'rediss:']`). A wrong scheme is refused at start: accepted,
 * it would fail only when a worker first uses it. The value is not repeated (it may hold a password).
 */
function urlOf(...schemes: string[]): Parser<string> {
  return (raw) => {
    let u: URL
    try {
      u = new URL(raw)
    } catch {
      throw new Error('must be a URL')
    }
    if (!schemes.includes(u.protocol))
      throw new Refusal(
        `must be a ${schemes.map((s) => `${s}//`).join(' or ')} URL, got ${u.protocol}//…`,
        EXIT_STATUS.urlScheme,
      )
    return raw
  }
}
const url = urlOf('http:', 'https:')

/** The longest OFFLINE_TOKEN_EXPIRE_HOURS: what outlives every offline token, whatever a process's setting. */
export const MAX_OFFLINE_TOKEN_HOURS = 24 * 30

/** `true`/`false`, a hop count, or a comma-separated list of addresses/CIDRs: Fastify's trustProxy forms. */
export type TrustProxy = boolean | number | string[]
/** proxy-addr's names for address ranges, usable in the list form. */
const PROXY_RANGE_NAMES = ['loopback', 'linklocal', 'uniquelocal']
const trustProxy: Parser<TrustProxy> = (raw) => {
  const v = raw.trim()
  if (v === 'true' || v === 'false') return v === 'true'
  if (/^\d+$/.test(v)) return Number(v)
  const list = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  if (list.length === 0) throw new Error('must be true, false, a hop count or a list of addresses')
  for (const entry of list) {
    const [address, bits, extra] = entry.split('/')
    const valid =
      PROXY_RANGE_NAMES.includes(entry) ||
      (extra === undefined &&
        isIP(address ?? '') !== 0 &&
        (bits === undefined || /^\d{1,3}$/.test(bits) || isIP(bits) === 4))
    if (!valid)
      throw new Error(
        `must be true, false, a hop count or a comma-separated list of addresses, CIDR ranges or ${PROXY_RANGE_NAMES.join(', ')}, got "${entry}"`,
      )
  }
  return list
}

function minLength(min: number): Parser<string> {
  return (raw) => {
    if (raw.length < min) throw new Error(`must be at least ${min} characters`)
    return raw
  }
}

const secretList: Parser<string[]> = (raw) =>
  raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)

/** A WebAuthn RP ID: a host name (no scheme, port or path), never an IP address. */
const rpId: Parser<string> = (raw) => {
  const v = raw.trim().toLowerCase()
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(v) || isIP(v) !== 0)
    throw new Error(`must be a host name such as example.com (no scheme, port or IP address), got "${raw}"`)
  return v
}

/** Origins as browsers send them: scheme, host and port only. */
const originList: Parser<string[]> = (raw) =>
  secretList(raw).map((o) => {
    let u: URL
    try {
      u = new URL(o)
    } catch {
      throw new Error(`must be origins such as https://example.com, got "${o}"`)
    }
    if (u.origin !== o.replace(/\/$/, '')) throw new Error(`must be origins (no path), got "${o}"`)
    return u.origin
  })

/**
 * An Ed25519 key as PKCS#8/SPKI PEM or the base64 body of one (a PEM's newlines are awkward in an
 * environment variable). Private keys are tried first; `allowPublic` takes public keys too (previous keys
 * only verify).
 */
function ed25519Key(raw: string, allowPublic: boolean): KeyObject {
  const text = raw.trim()
  const forms = text.includes('-----BEGIN')
    ? [{ key: text, format: 'pem' as const }]
    : [{ key: Buffer.from(text, 'base64'), format: 'der' as const }]
  for (const f of forms) {
    try {
      const k = createPrivateKey(f.format === 'der' ? { ...f, type: 'pkcs8' } : f)
      if (k.asymmetricKeyType === 'ed25519') return k
    } catch {}
    if (allowPublic)
      try {
        const k = createPublicKey(f.format === 'der' ? { ...f, type: 'spki' } : f)
        if (k.asymmetricKeyType === 'ed25519') return k
      } catch {}
  }
  throw new Error(
    allowPublic
      ? 'every key must be an Ed25519 key: PKCS#8 or SPKI PEM, or its base64 body'
      : 'must be an Ed25519 private key: PKCS#8 PEM, or its base64 body',
  )
}

const edgeKey: Parser<KeyObject> = (raw) => ed25519Key(raw, false)
const edgeKeyList: Parser<KeyObject[]> = (raw) => secretList(raw).map((k) => ed25519Key(k, true))

export interface HostPort {
  host: string
  port: number
}

/** `host:port` pairs separated by commas; an IPv6 address in brackets (`[::1]:26379`). */
const hostPortList: Parser<HostPort[]> = (raw) => {
  const list = secretList(raw).map((entry) => {
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s[\]]+)):(\d{1,5})$/.exec(entry)
    const port = Number(m?.[3])
    if (!m || port < 1 || port > 65535)
      throw new Error(`must be host:port pairs separated by commas, got "${entry}"`)
    return { host: (m[1] ?? m[2])!, port }
  })
  if (list.length === 0) throw new Error('must name at least one host:port')
  return list
}

const seconds: Parser<number[]> = (raw) =>
  raw.split(',').map((s) => {
    const n = Number(s.trim())
    if (!Number.isInteger(n) || n < 0)
      throw new Error(`must be whole seconds separated by commas, got "${raw}"`)
    return n
  })

export interface IdpIssuer {
  issuer: string
  audience: string
  jwks_uri?: string
}

const idpIssuers: Parser<IdpIssuer[]> = (raw) => {
  let list: unknown
  try {
    list = JSON.parse(raw)
  } catch {
    throw new Error('must be a JSON list of {issuer, audience, jwks_uri?}')
  }
  if (!Array.isArray(list)) throw new Error('must be a JSON list of {issuer, audience, jwks_uri?}')
  return list.map((entry, i) => {
    const e = entry as Record<string, unknown>
    if (typeof e?.issuer !== 'string' || typeof e.audience !== 'string')
      throw new Error(`entry ${i} needs string "issuer" and "audience"`)
    const unknown = Object.keys(e).filter((k) => !['issuer', 'audience', 'jwks_uri'].includes(k))
    if (unknown.length) throw new Error(`entry ${i} has unknown keys: ${unknown.join(', ')}`)
    url(e.issuer)
    if (e.jwks_uri !== undefined) {
      if (typeof e.jwks_uri !== 'string') throw new Error(`entry ${i}: jwks_uri must be a string`)
      url(e.jwks_uri)
    }
    return {
      issuer: e.issuer,
      audience: e.audience,
      ...(e.jwks_uri ? { jwks_uri: e.jwks_uri as string } : {}),
    }
  })
}

export const settings = {
  HOST: setting('Address to listen on', '127.0.0.1', text),
  PORT: setting('Port to listen on', '8000', integer(0, 65535)),
  NODE_ENV: setting(
    '`production` refuses to start without JWT_SECRET, EDGE_SIGNING_KEY and SMTP_URL / SMS_WEBHOOK_URL (or MAIL_TRANSPORT=outbox)',
    'development',
    oneOf('development', 'production', 'test'),
  ),
  LOG_LEVEL: setting(
    'Log level (fatal, error, warn, info, debug, trace, silent)',
    'info',
    oneOf('fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'),
  ),
  DATA_DIR: setting(
    "Folder for the SQLite file, the generated keys, the outbox, first-sync snapshots (scan-sync/) and the revocation load's file",
    './data',
    text,
  ),
  DATABASE_URL: setting(
    '`postgres://…` (or `postgresql://`) or `sqlite:<path>`; unset: `sqlite:<DATA_DIR>/wristband.db`, except in production, which refuses to start without it',
    undefined,
    text,
  ),
  DATABASE_SCHEMA: setting('PostgreSQL schema to use (created if missing)', 'public', text),
  DATABASE_POOL_SIZE: setting(
    'PostgreSQL connections per process: the service opens up to workers × this many',
    '10',
    integer(1, 1000),
  ),
  DATABASE_CONNECT_TIMEOUT_SECONDS: setting(
    'How long a request waits for a PostgreSQL connection (a new one, or a free one of the pool) before it fails with 503',
    '3',
    integer(1, 120),
  ),
  DATABASE_STATEMENT_TIMEOUT_SECONDS: setting(
    'PostgreSQL cancels a statement of the service running longer than this (`statement_timeout`); 0: no limit. Migrations are not limited',
    '30',
    integer(0, 3600),
  ),
  REDIS_URL: setting(
    'Redis for rate-limit counters and revocations shared by instances (`redis://` or `rediss://`); unset: in-process',
    undefined,
    urlOf('redis:', 'rediss:'),
  ),
  REDIS_PREFIX: setting('Prefix of every Redis key this deployment writes', 'wb:', text),
  REDIS_SENTINELS: setting(
    'Comma-separated `host:port` of Redis Sentinels, instead of REDIS_URL: the master named by REDIS_SENTINEL_MASTER is asked of them and followed across failovers (docs/operations.md, "Redis Sentinel")',
    undefined,
    hostPortList,
  ),
  REDIS_SENTINEL_MASTER: setting(
    'Name of the master the sentinels monitor (their `sentinel monitor <name> …` line); required with REDIS_SENTINELS',
    undefined,
    text,
  ),
  REDIS_PASSWORD: setting(
    'Password (AUTH) of the Redis master and replicas found through REDIS_SENTINELS; with REDIS_URL the password is part of the URL',
    undefined,
    text,
  ),
  REDIS_SENTINEL_PASSWORD: setting(
    'Password of the sentinels themselves (their `requirepass`), when they have one',
    undefined,
    text,
  ),
  JWT_SECRET: setting(
    'HS256 signing secret, at least 32 bytes; unset outside production: generated into DATA_DIR/jwt-secret',
    undefined,
    text,
  ),
  JWT_PREVIOUS_SECRETS: setting(
    'Comma-separated earlier secrets that still verify (rotation)',
    '',
    secretList,
  ),
  EDGE_SIGNING_KEY: setting(
    'Ed25519 private key (PKCS#8, PEM or base64) for ticket codes and EdDSA offline tokens; unset: generated into DATA_DIR/edge-key.pem (production: none)',
    undefined,
    edgeKey,
  ),
  EDGE_PREVIOUS_KEYS: setting(
    'Comma-separated earlier Ed25519 keys (base64 PKCS#8 or SPKI) still in /.well-known/jwks.json (rotation); they only verify, the current key alone signs',
    '',
    edgeKeyList,
  ),
  OFFLINE_TOKEN_ALG: setting(
    'Offline-token signature: `HS256` (the specification) or `EdDSA` (edge key, checkable offline by a device)',
    'HS256',
    oneOf('HS256', 'EdDSA'),
  ),
  JWT_AUDIENCE: setting('`aud` claim issued and required', 'wristband', text),
  JWT_ISSUER: setting('`iss` claim issued and required', 'wristband', text),
  ACCESS_TOKEN_EXPIRE_MINUTES: setting('Access-token lifetime', '15', integer(1, 24 * 60)),
  REFRESH_TOKEN_EXPIRE_DAYS: setting('Refresh-token lifetime', '30', integer(1, 365)),
  OFFLINE_TOKEN_EXPIRE_HOURS: setting('Offline-token lifetime', '72', integer(1, MAX_OFFLINE_TOKEN_HOURS)),
  DEVICE_KEYS_REQUIRED: setting(
    'Every device must present its device key at /devices/auth and /auth/login/device (`wristband device`); false: only devices that have one (warned at start in production); unset: true when NODE_ENV=production, else false',
    undefined,
    bool,
  ),
  DEVICE_SETUP_CODE_MINUTES: setting(
    'How long a device set-up code (`wristband device setup-code`, POST /devices/{device_id}/setup-code) can be exchanged',
    '10',
    integer(1, 24 * 60),
  ),
  MFA_FRESHNESS_WINDOW_HOURS: setting(
    'How long an MFA verification counts as fresh',
    '8',
    integer(1, 24 * 30),
  ),
  PASSKEYS_REQUIRED_FOR: setting(
    'Administrators who must sign in with a passkey once they have one (password + TOTP refused) and are asked to register one at sign-in until then: `none`, `superadmin`, `admins` (every administrator)',
    'none',
    oneOf('none', 'superadmin', 'admins'),
  ),
  WEBAUTHN_RP_ID: setting(
    'The WebAuthn relying party ID passkeys are bound to: the host name of the dashboard (or a parent domain of it); unset outside production: the host of PUBLIC_BASE_URL (`localhost` for an IP address); unset in production: passkeys off (refused at start when PASSKEYS_REQUIRED_FOR or WEBAUTHN_ORIGINS is set)',
    undefined,
    rpId,
  ),
  WEBAUTHN_ORIGINS: setting(
    'Comma-separated origins whose pages may register and use passkeys, each on WEBAUTHN_RP_ID or below it, https except for localhost; unset: the origin of PUBLIC_BASE_URL when it is on the RP ID, else https://<RP ID> (outside production also http://localhost:<PORT>)',
    undefined,
    originList,
  ),
  PUBLIC_BASE_URL: setting(
    'Base address used in links sent by e-mail and device set-up codes; also the issuer of the OAuth metadata (GET /.well-known/oauth-authorization-server) and the base of its endpoint addresses. Unset: http://127.0.0.1:<PORT>; a loopback address at another port than PORT is warned about at start',
    'http://127.0.0.1:8000',
    url,
  ),
  SMTP_URL: setting(
    'SMTP server for mail (`smtp://user:pass@host:port`, or `smtps://` for TLS from the start); unset: outbox folder',
    undefined,
    urlOf('smtp:', 'smtps:'),
  ),
  MAIL_TRANSPORT: setting(
    '`outbox`: mail and SMS are written as files under DATA_DIR/outbox even when SMTP_URL / SMS_WEBHOOK_URL are set; `smtp`: needs SMTP_URL; unset: SMTP_URL when set, else the outbox (production refuses to start without SMTP_URL and SMS_WEBHOOK_URL unless this is `outbox`)',
    undefined,
    oneOf('smtp', 'outbox'),
  ),
  SMTP_TIMEOUT_SECONDS: setting(
    'How long a connection to SMTP_URL may take to open, to greet, and stay silent in the middle of a send before the attempt fails (it is retried by the job queue)',
    '10',
    integer(1, 300),
  ),
  MAIL_FROM: setting('Sender address of outgoing mail', 'wristband <no-reply@wristband.local>', text),
  PASSWORD_RESET_EXPIRE_MINUTES: setting('Lifetime of a password-reset link', '30', integer(1, 24 * 60)),
  PASSWORD_RESET_HOURLY_QUOTA: setting(
    'Password-reset requests per submitted address (known or not) per hour',
    '3',
    integer(1, 1000),
  ),
  TRUST_PROXY: setting(
    'Peers that may name the client in X-Forwarded-For: addresses, CIDRs, `loopback`, `linklocal`, `uniquelocal`; `true`: every peer (unsafe); `false`: no peers',
    'loopback,linklocal,uniquelocal',
    trustProxy,
  ),
  IDP_ISSUERS: setting(
    'JSON list of `{issuer, audience, jwks_uri?}` trusted for /auth/login/idp; without `jwks_uri` the keys are found by OpenID discovery',
    '[]',
    idpIssuers,
  ),
  IDP_JWKS_COOLDOWN_SECONDS: setting(
    'Least time between two fetches of one identity provider key set (an unknown `kid` triggers a fetch)',
    '30',
    integer(0, 3600),
  ),
  IDP_HTTP_TIMEOUT_SECONDS: setting(
    'Timeout of each request to an identity provider (discovery, key set)',
    '5',
    integer(1, 60),
  ),
  SMS_WEBHOOK_URL: setting(
    'SMS provider endpoint (https in production): the service POSTs `{to, text}` as JSON there; unset: outbox folder DATA_DIR/outbox/sms',
    undefined,
    url,
  ),
  SMS_WEBHOOK_AUTHORIZATION: setting(
    'Value of the Authorization header sent to SMS_WEBHOOK_URL',
    undefined,
    text,
  ),
  SMS_WEBHOOK_TIMEOUT_SECONDS: setting('Timeout of each attempt to SMS_WEBHOOK_URL', '10', integer(1, 120)),
  SMS_WEBHOOK_RETRIES: setting(
    'Further attempts after a failed delivery to SMS_WEBHOOK_URL (network error, timeout, 429 or 5xx)',
    '2',
    integer(0, 10),
  ),
  SMS_GLOBAL_RATE_LIMIT: setting(
    'Text messages per minute the whole fleet sends (sign-in and verification codes, to any number, for any caller), besides the per-number and per-address limits; past it code requests answer 429 (Redis counts it across instances when REDIS_URL is set)',
    '600',
    integer(1, 1_000_000),
  ),
  WEBHOOK_ALLOW_PRIVATE: setting('Allow webhook receivers on loopback or private addresses', 'false', bool),
  WEBHOOK_RETRY_SCHEDULE: setting(
    'Seconds between webhook attempts',
    '5,30,120,600,1800,3600,10800,21600,43200,86400,86400',
    seconds,
  ),
  PARTNER_RATE_LIMIT: setting(
    'Requests per minute of one partner API key on the partner endpoints (/companies/*), answered with RateLimit-* headers; requests without a valid key are limited to 120 a minute per address',
    '6000',
    integer(1, 1_000_000),
  ),
  SCAN_SYNC_JSON_MAX_TICKETS: setting(
    'Largest event (tickets) whose first sync the object form of GET /events/{id}/scan-sync still answers; above it a sync without a cursor gets 413 `full_sync_too_large` and scanners take the compact form (`format=columns`, a shared snapshot; docs/offline.md)',
    '100000',
    integer(1, 100_000_000),
  ),
  TRANSFER_EMAIL_DELAY_SECONDS: setting(
    'Delay before the grouped transfer e-mail goes out',
    '60',
    integer(0, 86400),
  ),
  RETENTION_DAYS: setting(
    'Days finished jobs, finished webhook deliveries (with their attempts) and the claim-link tokens of claimed links are kept before the hourly retention job deletes them in small batches; revocations and refresh tokens go when they expire, pending deliveries and unclaimed links stay',
    '90',
    integer(1, 36_500),
  ),
  AUDIT_RETENTION_DAYS: setting(
    'Days audit rows are kept before the retention job deletes them',
    '365',
    integer(1, 36_500),
  ),
  AUDIT_SINK_URL: setting(
    'Where the audit log is sent as it is written: each batch of records POSTed as JSON lines (`application/x-ndjson`, each with its `cursor`); a 2xx acknowledges it, anything else is sent again from the last acknowledged cursor, which is kept in the database (docs/observability.md); unset: no sink',
    undefined,
    url,
  ),
  AUDIT_SINK_AUTHORIZATION: setting(
    'Value of the Authorization header sent to AUDIT_SINK_URL',
    undefined,
    text,
  ),
  AUDIT_SINK_POLL_MS: setting(
    'How often the audit sink looks for new records once it has sent everything, in milliseconds',
    '1000',
    integer(10, 60_000),
  ),
  JOBS_POLL_MS: setting(
    'How often background jobs (mail, webhooks) are polled, in milliseconds',
    '1000',
    integer(10, 60_000),
  ),
  JOBS_LEASE_SECONDS: setting(
    'How long a claimed background job is reserved for the instance running it; the runner renews the lease every third of it while the job runs, so only a runner that died (or froze that long) loses its job to another instance',
    '60',
    integer(1, 3600),
  ),
  SHUTDOWN_DRAIN_SECONDS: setting(
    'On SIGTERM, how long /ready answers 503 while requests are still served (so a load balancer stops sending) before the listener closes',
    '5',
    integer(0, 300),
  ),
  RATE_LIMIT_SYNC_MS: setting(
    'With Redis, for limits above 60 a minute (lower ones always count in Redis per request): how often each instance adds its counts to the shared ones (ms); a limit is exceeded by at most instances × this × the request rate. 0: every limit counts per request.',
    '100',
    integer(0, 60_000),
  ),
  REVOCATION_POLL_MS: setting(
    'How often each instance reads revocations written by other processes (the command line, other instances) from the database, in milliseconds; with Redis the revocation feed delivers them at once, this read is the fallback',
    '1000',
    integer(50, 60_000),
  ),
  VERIFY_FAST_LANE: setting(
    'Answer canonical POST /tokens/verify and GET /tokens/check requests before Fastify (same answers, less work per request); false: every request goes through Fastify',
    'true',
    bool,
  ),
  VERIFY_CLIENT_RATE_LIMIT: setting(
    'POST /tokens/verify requests per minute of one verify credential (an API key with scope `tokens:verify`, sent as `api_key`); callers without one: 600 per minute per address',
    '60000',
    integer(1, 100_000_000),
  ),
  CHECK_CACHE_SECONDS: setting(
    'How long a gateway may cache an allowed GET /tokens/check answer (Cache-Control max-age, never past the token expiry); 0: no-store. A cached answer outlives a revocation by up to this long (docs/gateways.md)',
    '0',
    integer(0, 5),
  ),
  REQUEST_TIMEOUT_SECONDS: setting(
    'A request whose headers and body have not all arrived this long after it began is answered 408 and its connection closed (Fastify routes and the verify lane alike)',
    '30',
    integer(1, 3600),
  ),
  BODY_LIMIT_BYTES: setting(
    'Largest accepted request body; larger ones get 413',
    '65536',
    integer(1024, 10 * 1024 * 1024),
  ),
  CORS_ORIGINS: setting('Comma-separated origins allowed by CORS; empty: CORS closed', '', secretList),
  METRICS_TOKEN: setting(
    'Bearer token (at least 16 characters) that GET /metrics requires; with neither this nor METRICS_PORT set, /metrics is not served',
    undefined,
    minLength(16),
  ),
  METRICS_PORT: setting(
    'Serve GET /metrics on this port (on HOST) instead of the public one, still requiring METRICS_TOKEN when that is set',
    undefined,
    integer(1, 65535),
  ),
} as const

/** Where the service finds Redis: one address, or the master a set of sentinels names. */
export type RedisTarget =
  | { url: string }
  | { sentinels: HostPort[]; master: string; password?: string; sentinelPassword?: string }

type Settings = typeof settings
export type Config = {
  readonly [K in keyof Settings]: Settings[K]['default'] extends string
    ? ReturnType<Settings[K]['parse']>
    : ReturnType<Settings[K]['parse']> | undefined
} & {
  readonly databaseUrl: string
  /** Resolved from NODE_ENV when unset. */
  readonly DEVICE_KEYS_REQUIRED: boolean
  /** Resolved from PUBLIC_BASE_URL outside production; undefined: passkeys are off. */
  readonly WEBAUTHN_RP_ID: string | undefined
  /** Resolved when unset; empty while passkeys are off. */
  readonly WEBAUTHN_ORIGINS: string[]
  /** REDIS_URL or the Sentinel settings resolved; undefined: no Redis (state in process). */
  readonly redis: RedisTarget | undefined
  /**
   * OpenTelemetry's standard variables ask for traces (OTEL_EXPORTER_OTLP_ENDPOINT or
   * OTEL_TRACES_EXPORTER): the SDK reads them itself (docs/observability.md).
   */
  readonly tracing: boolean
}

/**
 * The settings that hold a secret (or a URL with a password). Each may also be given as a file: the
 * path in `<NAME>_FILE`, or the credential `<name in lower case, - for _>` in `$CREDENTIALS_DIRECTORY`
 * (systemd's LoadCredential=); one source each, or the start is refused.
 */
export const SECRET_SETTINGS = [
  'JWT_SECRET',
  'JWT_PREVIOUS_SECRETS',
  'EDGE_SIGNING_KEY',
  'EDGE_PREVIOUS_KEYS',
  'DATABASE_URL',
  'REDIS_URL',
  'REDIS_PASSWORD',
  'REDIS_SENTINEL_PASSWORD',
  'SMTP_URL',
  'SMS_WEBHOOK_AUTHORIZATION',
  'AUDIT_SINK_AUTHORIZATION',
  'METRICS_TOKEN',
] as const satisfies readonly (keyof typeof settings)[]

/** The credential name of a secret setting: `JWT_SECRET` → `jwt-secret`. */
export const credentialName = (setting: string): string => setting.toLowerCase().replaceAll('_', '-')

export class ConfigError extends Error {
  /** The exit status of the first problem listed (unknown variables come first, then settings in order). */
  readonly exitStatus: ExitStatus
  constructor(
    readonly problems: string[],
    statuses: ExitStatus[] = [],
  ) {
    super(problems.map((p) => `wristband: ${p}`).join('\n'))
    this.exitStatus = statuses[0] ?? EXIT_STATUS.setting
  }
}

/**
 * A secret's value from its one source: the variable, the file named by `<NAME>_FILE`, or the
 * credential systemd passed. The end of a file (a trailing newline an editor adds) is trimmed.
 */
function secretSource(
  name: string,
  env: Record<string, string | undefined>,
  refuse: (text: string, status: ExitStatus) => void,
): string | undefined {
  const given = (v: string | undefined) => v !== undefined && v !== ''
  const sources: { what: string; file?: string }[] = []
  if (given(env[name])) sources.push({ what: name })
  const fileVar = `${name}_FILE`
  if (given(env[fileVar])) sources.push({ what: fileVar, file: env[fileVar]! })
  const dir = env.CREDENTIALS_DIRECTORY
  if (given(dir)) {
    const file = path.join(dir!, credentialName(name))
    if (fs.existsSync(file)) sources.push({ what: `the credential ${credentialName(name)}`, file })
  }
  if (sources.length > 1) {
    refuse(
      `${name}: given twice (${sources.map((s) => s.what).join(' and ')}); keep one`,
      EXIT_STATUS.secretSource,
    )
    return undefined
  }
  const [source] = sources
  if (!source?.file) return env[name]
  try {
    return fs.readFileSync(source.file, 'utf8').trimEnd()
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message
    refuse(`${name}: cannot read ${source.file} (${source.what}): ${code}`, EXIT_STATUS.secretSource)
    return undefined
  }
}

/** Parses and validates the environment once; every problem is reported, one line each. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const out: Record<string, unknown> = {}
  const problems: string[] = []
  const statuses: ExitStatus[] = []
  const refuse = (text: string, status: ExitStatus = EXIT_STATUS.setting) => {
    problems.push(text)
    statuses.push(status)
  }
  for (const p of unknownVariables(env)) refuse(p, EXIT_STATUS.unknownVariable)
  const secrets = new Set<string>(SECRET_SETTINGS)
  /** Settings given with a bad value: already refused, so not "required" too. */
  const refused = new Set<string>()
  for (const [name, s] of Object.entries(settings) as [string, Setting<unknown>][]) {
    const value = secrets.has(name)
      ? secretSource(name, env, (text, status) => {
          refused.add(name)
          refuse(text, status)
        })
      : env[name]
    const raw = value !== undefined && value !== '' ? value : s.default
    if (raw === undefined) {
      out[name] = undefined
      continue
    }
    try {
      out[name] = s.parse(raw)
    } catch (err) {
      refused.add(name)
      refuse(`${name}: ${(err as Error).message}`, err instanceof Refusal ? err.status : EXIT_STATUS.setting)
    }
  }
  // Unset, the public address is this machine at the port the service listens on.
  if ((env.PUBLIC_BASE_URL ?? '') === '' && typeof out.PORT === 'number' && out.PORT !== 0)
    out.PUBLIC_BASE_URL = `http://127.0.0.1:${out.PORT}`
  if (typeof out.JWT_SECRET === 'string' && Buffer.byteLength(out.JWT_SECRET) < 32) {
    refuse('JWT_SECRET: must be at least 32 bytes')
  }
  const production = out.NODE_ENV === 'production'
  if (production && out.JWT_SECRET === undefined && !refused.has('JWT_SECRET')) {
    refuse('JWT_SECRET: required when NODE_ENV=production (generate one with `wristband secret generate`)')
  }
  for (const s of (out.JWT_PREVIOUS_SECRETS as string[] | undefined) ?? []) {
    if (Buffer.byteLength(s) < 32) refuse('JWT_PREVIOUS_SECRETS: every secret must be at least 32 bytes')
  }
  // Production mistakes that would otherwise go unnoticed: mails counted as sent while they pile up in
  // a folder, ticket codes and the scanners' key set silently off, a new empty SQLite file.
  if (production && out.MAIL_TRANSPORT !== 'outbox') {
    if (out.SMTP_URL === undefined && !refused.has('SMTP_URL'))
      refuse(
        'SMTP_URL: required when NODE_ENV=production (or MAIL_TRANSPORT=outbox to write mail and SMS as files under DATA_DIR/outbox)',
      )
    if (out.SMS_WEBHOOK_URL === undefined && !refused.has('SMS_WEBHOOK_URL'))
      refuse(
        'SMS_WEBHOOK_URL: required when NODE_ENV=production (or MAIL_TRANSPORT=outbox to write mail and SMS as files under DATA_DIR/outbox)',
      )
  }
  // The SMS provider gets every sign-in code and the provider's credential: never in clear text.
  if (production && typeof out.SMS_WEBHOOK_URL === 'string' && !out.SMS_WEBHOOK_URL.startsWith('https:'))
    refuse('SMS_WEBHOOK_URL: must be an https:// URL when NODE_ENV=production', EXIT_STATUS.urlScheme)
  if (out.MAIL_TRANSPORT === 'smtp' && out.SMTP_URL === undefined)
    refuse('MAIL_TRANSPORT: smtp needs SMTP_URL')
  if (production && out.EDGE_SIGNING_KEY === undefined && !refused.has('EDGE_SIGNING_KEY'))
    refuse(
      "EDGE_SIGNING_KEY: required when NODE_ENV=production (ticket codes and the scanners' key set; generate one with `openssl genpkey -algorithm ed25519`)",
    )
  if (out.METRICS_PORT !== undefined && out.METRICS_PORT === out.PORT)
    refuse('METRICS_PORT: must differ from PORT (the metrics listener is a server of its own)')
  if (production && out.DATABASE_URL === undefined && !refused.has('DATABASE_URL'))
    refuse(
      'DATABASE_URL: required when NODE_ENV=production (postgres://…, or sqlite:/var/lib/wristband/wristband.db for a single instance); without it the service would start on a new, empty SQLite file',
      EXIT_STATUS.productionDatabase,
    )
  const dbUrl =
    (out.DATABASE_URL as string | undefined) ?? `sqlite:${path.join(String(out.DATA_DIR), 'wristband.db')}`
  if (!/^(sqlite:|postgres(ql)?:\/\/)/.test(dbUrl))
    refuse(
      `DATABASE_URL: must start with postgres://, postgresql:// or sqlite:, got ${/^[a-z][a-z0-9+.-]*:/i.exec(dbUrl)?.[0] ?? 'no scheme'}`,
      EXIT_STATUS.urlScheme,
    )
  for (const p of resolveWebAuthn(out)) refuse(p)
  const redisProblems: string[] = []
  const redis = resolveRedis(out, redisProblems)
  for (const p of redisProblems) refuse(p)
  if (problems.length > 0) throw new ConfigError(problems, statuses)
  // Key-less device sign-in (the specification's) stays the development default only.
  out.DEVICE_KEYS_REQUIRED ??= production
  return Object.freeze({ ...out, databaseUrl: dbUrl, redis, tracing: tracingRequested(env) }) as Config
}

/** REDIS_URL, or the master REDIS_SENTINELS name; never both, and the Sentinel settings only together. */
function resolveRedis(out: Record<string, unknown>, problems: string[]): RedisTarget | undefined {
  const url = out.REDIS_URL as string | undefined
  const sentinels = out.REDIS_SENTINELS as HostPort[] | undefined
  const master = out.REDIS_SENTINEL_MASTER as string | undefined
  const password = out.REDIS_PASSWORD as string | undefined
  const sentinelPassword = out.REDIS_SENTINEL_PASSWORD as string | undefined
  if (url !== undefined && sentinels !== undefined) {
    problems.push('REDIS_SENTINELS: set either REDIS_URL or REDIS_SENTINELS, not both')
    return undefined
  }
  if (sentinels === undefined) {
    for (const [name, value] of Object.entries({
      REDIS_SENTINEL_MASTER: master,
      REDIS_PASSWORD: password,
      REDIS_SENTINEL_PASSWORD: sentinelPassword,
    }))
      if (value !== undefined)
        problems.push(
          `${name}: only used with REDIS_SENTINELS${name === 'REDIS_PASSWORD' ? ' (with REDIS_URL the password goes into the URL: redis://:password@host:6379)' : ''}`,
        )
    return url === undefined ? undefined : { url }
  }
  if (master === undefined) {
    problems.push('REDIS_SENTINEL_MASTER: required with REDIS_SENTINELS (the name the sentinels monitor)')
    return undefined
  }
  return {
    sentinels,
    master,
    ...(password !== undefined ? { password } : {}),
    ...(sentinelPassword !== undefined ? { sentinelPassword } : {}),
  }
}

/**
 * Resolves WEBAUTHN_RP_ID and WEBAUTHN_ORIGINS (in `out`) and answers their problems: passkeys are on
 * when there is an RP ID; production takes none by default, and refuses to start when passkeys are asked
 * for (PASSKEYS_REQUIRED_FOR, WEBAUTHN_ORIGINS) without one. Every origin must be on the RP ID (or below
 * it) and https, except for localhost, or browsers would refuse every ceremony.
 */
function resolveWebAuthn(out: Record<string, unknown>): string[] {
  const problems: string[] = []
  const base = typeof out.PUBLIC_BASE_URL === 'string' ? new URL(out.PUBLIC_BASE_URL) : undefined
  const production = out.NODE_ENV === 'production'
  if (out.WEBAUTHN_RP_ID === undefined && !production && base)
    out.WEBAUTHN_RP_ID = isIP(base.hostname.replace(/^\[|\]$/g, '')) !== 0 ? 'localhost' : base.hostname
  const rp = out.WEBAUTHN_RP_ID as string | undefined
  const asked = out.PASSKEYS_REQUIRED_FOR !== 'none' || out.WEBAUTHN_ORIGINS !== undefined
  if (rp === undefined) {
    if (production && asked)
      problems.push(
        'WEBAUTHN_RP_ID: required in production when passkeys are on (PASSKEYS_REQUIRED_FOR or WEBAUTHN_ORIGINS is set)',
      )
    out.WEBAUTHN_ORIGINS = []
    return problems
  }
  const onRp = (host: string) => host === rp || host.endsWith(`.${rp}`)
  if (out.WEBAUTHN_ORIGINS === undefined) {
    const origins = base && onRp(base.hostname) ? [base.origin] : [`https://${rp}`]
    if (!production && rp === 'localhost' && typeof out.PORT === 'number')
      origins.push(`http://localhost:${out.PORT}`)
    out.WEBAUTHN_ORIGINS = [...new Set(origins)]
  }
  for (const origin of out.WEBAUTHN_ORIGINS as string[]) {
    const u = new URL(origin)
    if (!onRp(u.hostname)) problems.push(`WEBAUTHN_ORIGINS: ${origin} is not on WEBAUTHN_RP_ID ${rp}`)
    else if (u.protocol !== 'https:' && u.hostname !== 'localhost')
      problems.push(`WEBAUTHN_ORIGINS: ${origin} must be https (browsers allow http for localhost only)`)
  }
  return problems
}

/**
 * Whether two short names are at most `most` edits apart: insertions, deletions, substitutions, and a
 * swap of two neighbouring letters counted as one edit (PROT for PORT), the commonest slip of a typist.
 * Every process compares each variable of its environment (dozens in a shell) with every setting at
 * start, so the table is filled row by row and given up once no cell of it can come back within `most`.
 */
function withinEdits(a: string, b: string, most: number): boolean {
  if (Math.abs(a.length - b.length) > most) return false
  let before = new Int32Array(b.length + 1)
  let previous = Int32Array.from({ length: b.length + 1 }, (_, j) => j)
  let current = new Int32Array(b.length + 1)
  let previousMin = 0
  for (let i = 1; i <= a.length; i++) {
    current[0] = i
    let rowMin = i
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let best = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, before[j - 2]! + 1)
      current[j] = best
      if (best < rowMin) rowMin = best
    }
    // A later cell comes from this row or, by a swap, from the one before plus one edit.
    if (Math.min(rowMin, previousMin + 1) > most) return false
    previousMin = rowMin
    ;[before, previous, current] = [previous, current, before]
  }
  return previous[b.length]! <= most
}

/** Variables people set for what is not a setting here, with where it is set instead (warned about). */
const NOT_SETTINGS: Readonly<Record<string, string>> = {
  WORKERS: 'the number of workers is an option: `wristband serve --workers N`',
  WEB_CONCURRENCY: 'the number of workers is an option: `wristband serve --workers N`',
}

/** Variables of the environment that are not settings but are read by the service or its runtime. */
const OTHER_KNOWN = new Set(['CREDENTIALS_DIRECTORY'])

/**
 * Prefixes of this service's settings that no other program of a deployment uses: a variable that
 * starts with one and is no setting is a mistake (`EDGE_SIGNING_KEY_PEM`, `REDIS_PASSWORD`).
 */
const SERVICE_PREFIXES = [
  'WRISTBAND_',
  'JWT_',
  'EDGE_',
  'DATABASE_',
  'REDIS_',
  'SMTP_',
  'MAIL_',
  'SMS_',
  'WEBHOOK_',
  'WEBAUTHN_',
  'PASSKEYS_',
  'IDP_',
  'METRICS_',
  'JOBS_',
  'PARTNER_',
  'TRANSFER_',
  'OFFLINE_',
  'VERIFY_',
  'DEVICE_',
  'RETENTION_',
  'AUDIT_',
  'PASSWORD_RESET_',
  'ACCESS_TOKEN_',
  'REFRESH_TOKEN_',
  'MFA_',
]

/**
 * Kubernetes puts `<SERVICE>_SERVICE_HOST`, `<SERVICE>_PORT=tcp://…` and the like into every pod for
 * each service of its namespace (a service named redis gives REDIS_PORT): not the operator's typos.
 */
function serviceLink(name: string, value: string | undefined): boolean {
  return (
    /_SERVICE_(HOST|PORT)(_[A-Z0-9_]+)?$/.test(name) ||
    /_PORT_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?$/.test(name) ||
    (/_PORT$/.test(name) && /^(tcp|udp|sctp):\/\//.test(value ?? ''))
  )
}

/**
 * Variables of the environment that look like settings but are none, in any case: the wrong case of a
 * setting (`Database_Url`), a near-miss of one (`JWT_SECRETS`, `REDIS_URLS`, `LOGLEVEL`, `PROT`), or a
 * name with one of the service's prefixes. A setting that is not read silently falls back to its
 * default, which is how a typo in a deployment goes unnoticed (a production instance on a new, empty
 * SQLite file): each is refused, one line naming it.
 */
function unknownVariables(env: Record<string, string | undefined>): string[] {
  const known = Object.keys(settings)
  const knownNames = new Set([...known, ...SECRET_SETTINGS.map((s) => `${s}_FILE`), ...OTHER_KNOWN])
  const problems: string[] = []
  for (const name of Object.keys(env)) {
    // OpenTelemetry's standard variables are read by its SDK (docs/observability.md).
    if (knownNames.has(name) || NOT_SETTINGS[name] || name.startsWith('OTEL_')) continue
    const upper = name.toUpperCase()
    if (knownNames.has(upper)) {
      problems.push(`${name}: settings are upper case; did you mean ${upper}?`)
      continue
    }
    if (!/^[A-Z][A-Z0-9_]*$/.test(upper) || serviceLink(upper, env[name])) continue
    // Short names (HOST, PORT) allow one edit, so that PATH or HOME are not taken for them.
    const squeezed = upper.replaceAll('_', '')
    const near = known.filter((k) => {
      if (squeezed === k.replaceAll('_', '')) return true
      const most = Math.min(upper.length, k.length) < 6 ? 1 : 2
      return withinEdits(upper, k, most)
    })
    if (near.length > 0)
      problems.push(`${name}: not a setting of wristband; did you mean ${near.join(' or ')}?`)
    else if (SERVICE_PREFIXES.some((p) => upper.startsWith(p)))
      problems.push(`${name}: not a setting of wristband (the settings are listed in the README)`)
  }
  return problems
}

/**
 * Settings that are valid each but do not fit together, told at start (the service starts anyway): a
 * PUBLIC_BASE_URL on this machine's loopback at another port than PORT sends every e-mailed link, set-up
 * QR code and OAuth metadata address to a port nothing of this instance listens on. A public host name
 * behind a proxy may well have another port, and is not warned about.
 */
export function configWarnings(config: Pick<Config, 'PORT' | 'PUBLIC_BASE_URL'>): string[] {
  const base = new URL(config.PUBLIC_BASE_URL)
  const host = base.hostname.replace(/^\[|\]$/g, '')
  const loopback = host === 'localhost' || host === '::1' || /^127\./.test(host)
  const port = Number(base.port || (base.protocol === 'https:' ? 443 : 80))
  if (!loopback || config.PORT === 0 || port === config.PORT) return []
  return [
    `PUBLIC_BASE_URL (${base.origin}) is this machine at port ${port}, but the service listens on PORT ${config.PORT}: ` +
      'links in e-mail, device set-up codes and the OAuth metadata will point there; set PUBLIC_BASE_URL to the address clients use',
  ]
}

/** Variables set for what is no setting of the service, with where it is set instead: one warning each. */
export function settingWarnings(env: Record<string, string | undefined>): string[] {
  return Object.keys(env)
    .filter((name) => NOT_SETTINGS[name])
    .map((name) => `${name} is not a setting of wristband and is ignored; ${NOT_SETTINGS[name]}`)
}
