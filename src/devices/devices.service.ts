import { recordInTransaction } from '../audit/audit.service.js'
import type { AuditLog } from '../audit/audit.store.js'
import { eventExists, findEventSummary } from '../events/events.store.js'
import { BASELINE_SCOPES, type Grant, operatorGrant } from '../identities/grants.js'
import {
  findOperatorAtEvent,
  findOperatorByEmail,
  storedGrant,
  updatePasswordHash,
} from '../identities/identities.store.js'
import { type AuthEvents, counted } from '../platform/auth-events.js'
import type { Clock } from '../platform/clock.js'
import { MAX_OFFLINE_TOKEN_HOURS } from '../platform/config.js'
import type { Db } from '../platform/db/database.js'
import { safeEqual, sha256Hex } from '../platform/digest.js'
import { ConflictError, ForbiddenError, NotFoundError, UnauthorizedError } from '../platform/errors.js'
import type { Sealer } from '../platform/keys.js'
import { type PasswordSignInDeps, passwordBudget, signInWithPassword } from '../platform/password-sign-in.js'
import { randomToken } from '../platform/random.js'
import { type Claims, deviceTokensJti, reachesEvent } from '../tokens/claims.js'
import type { Revocation } from '../tokens/revocations.js'
import { insertRevocations } from '../tokens/revocations.store.js'
import type { TokenService } from '../tokens/token.service.js'
import {
  archiveDevice,
  type DeviceRecord,
  deleteSession,
  deviceHasKey,
  findActiveDevice,
  findDeviceByMac,
  findSession,
  findSessionOperator,
  getDevice,
  insertDevice,
  insertSession,
  nextTokenGeneration,
  setDeviceKeyHash,
  setDeviceOperator,
} from './devices.store.js'
import { insertSetupCode, setupCodeState, takeSetupCode } from './setup-codes.store.js'

export const DEV_TYPES = ['POS', 'REPORT', 'FASTPASS', 'KIDS', 'DISPATCH'] as const
export type DevType = (typeof DEV_TYPES)[number]

/** docs/specification.md: each special device type needs its own mode; POS takes every other mode. */
const MODE_OF: Record<Exclude<DevType, 'POS'>, number> = { REPORT: 3, FASTPASS: 4, KIDS: 5, DISPATCH: 6 }
const SPECIAL_MODES = new Set(Object.values(MODE_OF))

export function devTypeAllowed(devType: DevType, mode: number): boolean {
  return devType === 'POS' ? !SPECIAL_MODES.has(mode) : MODE_OF[devType] === mode
}

/** Operator session tokens; the prefix lets /tokens/verify and secret scanners recognise them. */
export const SESSION_PREFIX = 'wbs_'
/** How long a caller may trust a session answer of /tokens/verify: the 60-second cache of the spec. */
const SESSION_CLAIMS_WINDOW_SECONDS = 60
const INVALID_OPERATOR_LOGIN = 'Incorrect email or password'

/** Device keys; the prefix lets secret scanners recognise them. */
export const DEVICE_KEY_PREFIX = 'wbd_'

/** A new device key and the SHA-256 that is stored in its place. */
export function newDeviceKey(): { key: string; hash: string } {
  const key = `${DEVICE_KEY_PREFIX}${randomToken(32)}`
  return { key, hash: sha256Hex(key) }
}

/**
 * Ends every offline token issued to a device so far (archive, key rotation, `wristband device revoke`):
 * starts its next token generation and writes the revocation of the one that ended, in the caller's
 * transaction, so the device row and the revocation list change together. Every instance reads the list
 * within REVOCATION_POLL_MS; the caller publishes the returned entry after the commit (Redis) so they
 * hear of it at once. The entry outlives any offline token, whatever the lifetime setting of the process
 * that issued it. Undefined when there is no such device.
 */
export async function endDeviceTokens(
  tx: Db,
  deviceId: number,
  now: number,
): Promise<Revocation | undefined> {
  const ended = await nextTokenGeneration(tx, deviceId)
  if (ended === undefined) return undefined
  const entry = {
    jti: deviceTokensJti(deviceId, ended),
    expiresAt: now + MAX_OFFLINE_TOKEN_HOURS * 3_600_000,
  }
  await insertRevocations(tx, now, [entry])
  return entry
}

// Device administration (`wristband device ...`), each step in the caller's transaction (the command's
// audited one); the caller publishes a returned revocation after the commit.

/** A device by id or by hardware address (in either case), archived or not. */
export function findDevice(db: Db, by: { id: number } | { mac: string }): Promise<DeviceRecord | undefined> {
  return 'id' in by ? getDevice(db, by.id) : findDeviceByMac(db, by.mac)
}

/**
 * Registers a device at an event with the SHA-256 of its new key, acting as `operatorId` (an operator
 * of that event) when given: its id, or why not (checked in this order).
 */
export async function registerDevice(
  tx: Db,
  input: { mac: string; eventId: number; operatorId: number | null; keyHash: string; now: number },
): Promise<{ id: number } | { refused: 'no_event' | 'mac_taken' | 'no_operator' }> {
  if (!(await eventExists(tx, input.eventId))) return { refused: 'no_event' }
  if (await findDeviceByMac(tx, input.mac)) return { refused: 'mac_taken' }
  if (input.operatorId !== null && !(await findOperatorAtEvent(tx, input.operatorId, input.eventId)))
    return { refused: 'no_operator' }
  const id = await insertDevice(tx, {
    dev_mac: input.mac,
    event_id: input.eventId,
    operator_id: input.operatorId,
    key_hash: input.keyHash,
    created_at: input.now,
  })
  return { id }
}

/** Gives a device a new key (its SHA-256) and ends the offline tokens issued so far. */
export async function rotateDeviceKey(
  tx: Db,
  deviceId: number,
  keyHash: string,
  now: number,
): Promise<Revocation | undefined> {
  await setDeviceKeyHash(tx, deviceId, keyHash)
  return endDeviceTokens(tx, deviceId, now)
}

/** Ends a device's offline tokens (a lost or stolen scanner), archiving it first when asked. */
export async function retireDevice(tx: Db, deviceId: number, archive: boolean, now: number) {
  const archived = archive ? await archiveDevice(tx, deviceId) : false
  return { archived, ended: await endDeviceTokens(tx, deviceId, now) }
}

/**
 * Ends every offline token issued to a device so far (a lost or stolen scanner), archiving it too when
 * asked, as `wristband device revoke` does: the device's next token generation and its revocation in
 * one transaction with the audit record (`device_revoke`), published to every instance after the commit.
 * The one way of the admin API and the dashboard; `by` names the caller and the events it reaches (404
 * for an unknown device, 403 for one of an event it does not reach).
 */
export async function revokeDevice(
  deps: { db: Db; clock: Clock; publishRevocation: (entry: Revocation) => Promise<void> },
  by: { actor: string; reaches: (eventId: number) => boolean },
  deviceId: number,
  archive: boolean,
  ip: string,
) {
  const { db, clock } = deps
  const d = await getDevice(db, deviceId)
  if (!d) throw new NotFoundError('Device not found')
  if (!by.reaches(d.event_id)) throw new ForbiddenError()
  const now = clock.now()
  const done = await db.transaction().execute(async (tx) => {
    const retired = await retireDevice(tx, d.id, archive, now)
    await recordInTransaction(tx, now, {
      kind: 'device_revoke',
      actor: by.actor,
      ip,
      outcome: 'success',
      detail: { device_id: d.id, dev_mac: d.dev_mac, archived: archive },
    })
    return retired
  })
  if (done.ended) await deps.publishRevocation(done.ended)
  return { device_id: d.id, archived: archive || Boolean(d.archived), tokens_revoked: true as const }
}

/** One-time set-up codes; the prefix lets secret scanners recognise them. */
export const SETUP_CODE_PREFIX = 'wbsu_'

/**
 * What a set-up QR code holds: the scanner page the service serves, with the code in the URL's fragment.
 * A phone's camera opens it; a browser never sends the fragment to a server, so the code is in no log.
 */
export function setupUrl(publicBaseUrl: string, code: string): string {
  return `${publicBaseUrl.replace(/\/+$/, '')}/scanner/#setup=${code}`
}

/**
 * A one-time set-up code for a registered device (its SHA-256 stored, valid `minutes`), replacing the
 * device's earlier unused one; or why not: the device is unknown, archived, or acts as no operator of its
 * event (it could exchange the code but never sign in). `reaches` limits the caller to its events.
 */
export async function createSetupCode(
  tx: Db,
  input: {
    deviceId: number
    createdBy: string
    now: number
    minutes: number
    reaches?: (eventId: number) => boolean
  },
): Promise<
  | { code: string; expiresAt: number; device: DeviceRecord }
  | { refused: 'no_device' | 'no_access' | 'no_operator' }
> {
  const device = await getDevice(tx, input.deviceId)
  if (!device || device.archived) return { refused: 'no_device' }
  if (input.reaches && !input.reaches(device.event_id)) return { refused: 'no_access' }
  if (device.operator_id === null || !(await findOperatorAtEvent(tx, device.operator_id, device.event_id)))
    return { refused: 'no_operator' }
  const code = `${SETUP_CODE_PREFIX}${randomToken(16)}`
  const expiresAt = input.now + input.minutes * 60_000
  await insertSetupCode(tx, {
    device_id: device.id,
    code_hash: sha256Hex(code),
    created_by: input.createdBy,
    created_at: input.now,
    expires_at: expiresAt,
  })
  return { code, expiresAt, device }
}

/**
 * Exchanges a set-up code, once, for the device's credentials: a new device key (only its SHA-256 is
 * stored, so handing one out means making one), which ends the offline tokens issued to the device so far
 * (a device set up again leaves its old set-up behind). The caller publishes the returned revocation
 * after the commit. Refused, as one answer, when the code is unknown, used, expired or its device archived.
 */
export async function exchangeSetupCode(
  tx: Db,
  code: string,
  now: number,
): Promise<
  | { device: DeviceRecord; key: string; ended: Revocation | undefined }
  | { refused: 'unknown' | 'used' | 'expired' | 'archived'; deviceId?: number }
> {
  const hash = sha256Hex(code)
  const deviceId = await takeSetupCode(tx, hash, now)
  if (deviceId === undefined) {
    const state = await setupCodeState(tx, hash)
    if (!state) return { refused: 'unknown' }
    return { refused: state.used ? 'used' : 'expired', deviceId: state.device_id }
  }
  const device = await getDevice(tx, deviceId)
  if (!device || device.archived) return { refused: 'archived', deviceId }
  const { key, hash: keyHash } = newDeviceKey()
  const ended = await rotateDeviceKey(tx, device.id, keyHash, now)
  return { device, key, ended }
}

// Every device (of one event when given), archived ones included, with whether a key is set: the
// store's read, re-exported (a function that only renames a store call is not kept).
export { listDevices } from './devices.store.js'

/**
 * docs/specification.md: a device acts as its associated operator (role operator) with the device baseline
 * scopes at the device's event only. A device without a key (possible only with
 * DEVICE_KEYS_REQUIRED=false) never holds `sync:*`: anyone who knows its MAC and event id could sign in
 * as it, and must not download every code of the event nor upload scans.
 */
export function deviceGrant(
  operator: { id: number; token_generation: number },
  eventId: number,
  keyed: boolean,
): Grant {
  const scopes = BASELINE_SCOPES.device.filter((s) => keyed || !s.startsWith('sync:'))
  return {
    sub: String(operator.id),
    role: 'operator',
    event_ids: [eventId],
    permissions: { [String(eventId)]: scopes },
    account_gen: operator.token_generation,
  }
}

/**
 * The claims an offline token of a device carries besides its grant: the device, its token generation,
 * its event, and `device_keyless` for a device without a key (the feed and scan uploads refuse it with
 * 403 `device_key_required`, docs/security.md).
 */
function deviceClaims(d: { id: number; token_generation: number; event_id: number }, keyed: boolean) {
  return {
    device_id: d.id,
    device_gen: d.token_generation,
    event_id: d.event_id,
    ...(keyed ? {} : { device_keyless: true }),
  }
}

/** Why a set-up code was refused: thrown inside the exchange's transaction, so it rolls back. */
class SetupRefused extends Error {
  constructor(
    readonly reason: string,
    readonly deviceId: number | undefined,
  ) {
    super(`set-up code refused: ${reason}`)
  }
}

export interface DeviceDeps {
  db: Db
  clock: Clock
  tokens: TokenService
  audit: AuditLog
  /** The password sign-in; an operator's failures count with those at /auth/login (one password). */
  passwords: PasswordSignInDeps
  authEvents: AuthEvents
  /**
   * Seals operator session tokens at rest. The spec wants the same token handed out again until
   * logout, so a one-way hash alone cannot do; the plaintext in the database would turn a read-only
   * leak of it into working credentials. Sealed under a key derived from the signing secret, the
   * token is only recoverable by whoever also holds that secret, who could mint tokens anyway.
   */
  sealer: Sealer
  /** DEVICE_KEYS_REQUIRED: a device without a key cannot authenticate at all. */
  keysRequired: boolean
  /** Publishes a device's ended tokens to every instance at once (the revocation list's `revoke`). */
  publishRevocation: (entry: Revocation) => Promise<void>
  /** DEVICE_SETUP_CODE_MINUTES, and PUBLIC_BASE_URL for the address a set-up QR code holds. */
  setup: { minutes: number; publicBaseUrl: string }
}

export class DeviceService {
  constructor(private readonly deps: DeviceDeps) {}

  /**
   * rule 13: the device of that event, unless archived; 404 otherwise. A device that has a key (every
   * device with DEVICE_KEYS_REQUIRED) must present it: 401 when it is missing or wrong.
   */
  async authenticate(devMac: string, eventId: number, deviceKey: string | undefined, ip: string) {
    const d = await findActiveDevice(this.deps.db, devMac, eventId)
    if (!d) throw new NotFoundError('Device not found')
    if (d.key_hash === null && !this.deps.keysRequired) return d
    // Hashes of equal length compared in constant time; a key-less device under keysRequired never matches.
    if (d.key_hash === null || deviceKey === undefined || !safeEqual(sha256Hex(deviceKey), d.key_hash)) {
      await this.deps.audit.record({
        kind: 'device_key',
        actor: `device:${d.id}`,
        ip,
        outcome: 'failure',
        detail: { reason: d.key_hash === null ? 'no_key_provisioned' : deviceKey ? 'wrong' : 'missing' },
      })
      throw new UnauthorizedError('Device key missing or wrong')
    }
    return d
  }

  /** rule 4: an offline token for the device's associated operator; 403 when there is none at the event. */
  login(devMac: string, eventId: number, deviceKey: string | undefined, ip: string) {
    return counted(this.deps.authEvents, 'login_device', () => this.signIn(devMac, eventId, deviceKey, ip))
  }

  private async signIn(devMac: string, eventId: number, deviceKey: string | undefined, ip: string) {
    const d = await this.authenticate(devMac, eventId, deviceKey, ip)
    const operator =
      d.operator_id === null ? undefined : await findOperatorAtEvent(this.deps.db, d.operator_id, d.event_id)
    if (!operator) throw new ForbiddenError('No operator is associated with this device')
    const { token, claims } = this.deps.tokens.issueOffline(
      deviceGrant(operator, d.event_id, d.key_hash !== null),
      deviceClaims(d, d.key_hash !== null),
    )
    await this.deps.audit.record({
      kind: 'device_login',
      actor: `operator:${operator.id}`,
      ip,
      outcome: 'success',
      detail: { device_id: d.id },
    })
    return {
      offline_token: token,
      token_type: 'bearer',
      expires_at: new Date(claims.exp * 1000).toISOString(),
    }
  }

  /**
   * rule 14: associates an operator of the device's event with the device and issues the device's
   * offline token. Administrators and operators reaching the event may do this.
   */
  async issueDeviceToken(caller: Claims, deviceId: number, operatorId: number, ip: string) {
    const { db } = this.deps
    // The device token outlives the caller's access token: the account as stored now decides.
    const grant = await storedGrant(db, caller)
    const d = await getDevice(db, deviceId)
    if (!d || d.archived) throw new NotFoundError('Device not found')
    if (!reachesEvent(grant, d.event_id)) throw new ForbiddenError()
    const operator = await findOperatorAtEvent(db, operatorId, d.event_id)
    if (!operator) throw new NotFoundError("No such operator at the device's event")
    await setDeviceOperator(db, d.id, operator.id)
    const keyed = await deviceHasKey(db, d.id)
    const { token } = this.deps.tokens.issueOffline(
      deviceGrant(operator, d.event_id, keyed),
      deviceClaims(d, keyed),
    )
    await this.deps.audit.record({
      kind: 'device_token',
      actor: `${caller.role}:${caller.sub}`,
      ip,
      outcome: 'success',
      detail: { device_id: d.id, operator_id: operator.id },
    })
    return { token, token_type: 'bearer' }
  }

  /**
   * POST /devices/{device_id}/revoke: `revokeDevice` for an administrator of the device's event, as the
   * account is stored now (404 for an unknown device, 403 for one of an event the caller does not reach).
   */
  async revoke(caller: Claims, deviceId: number, archive: boolean, ip: string) {
    const grant = await storedGrant(this.deps.db, caller)
    return revokeDevice(
      this.deps,
      { actor: `${caller.role}:${caller.sub}`, reaches: (eventId) => reachesEvent(grant, eventId) },
      deviceId,
      archive,
      ip,
    )
  }

  /**
   * A one-time set-up code for a device of an event the caller reaches, shown as a QR code (its
   * `setup_url`) and as text; the device's earlier unused code stops working. 404 for an unknown or
   * archived device, 403 for one of an event the caller does not reach, 409 when the device acts as no
   * operator of its event (set one with POST /devices/{device_id}/token first).
   */
  async newSetupCode(caller: Claims, deviceId: number, ip: string) {
    const { db, clock, setup } = this.deps
    const grant = await storedGrant(db, caller)
    const made = await db.transaction().execute((tx) =>
      createSetupCode(tx, {
        deviceId,
        createdBy: `${caller.role}:${caller.sub}`,
        now: clock.now(),
        minutes: setup.minutes,
        reaches: (eventId) => reachesEvent(grant, eventId),
      }),
    )
    if ('refused' in made) {
      if (made.refused === 'no_operator')
        throw new ConflictError(
          'The device acts as no operator of its event: associate one (POST /devices/{device_id}/token) first',
        )
      if (made.refused === 'no_access') throw new ForbiddenError()
      throw new NotFoundError('Device not found')
    }
    await this.deps.audit.record({
      kind: 'device_setup_code',
      actor: `${caller.role}:${caller.sub}`,
      ip,
      outcome: 'success',
      detail: { device_id: deviceId, expires_at: new Date(made.expiresAt).toISOString() },
    })
    return {
      device_id: made.device.id,
      code: made.code,
      setup_url: setupUrl(setup.publicBaseUrl, made.code),
      expires_at: new Date(made.expiresAt).toISOString(),
    }
  }

  /**
   * A scanner exchanges its set-up code, once, for its credentials: the device's id, MAC and event and a
   * new device key, with which it signs in at POST /auth/login/device. Unknown, used and expired codes
   * (and one of a device archived since) are the same 404; every exchange is audited.
   */
  async setUp(code: string, ip: string) {
    const { db, clock } = this.deps
    const now = clock.now()
    let done: Exclude<Awaited<ReturnType<typeof exchangeSetupCode>>, { refused: unknown }>
    try {
      done = await db.transaction().execute(async (tx) => {
        const r = await exchangeSetupCode(tx, code, now)
        // A refused exchange changes nothing: the code stays as it was (a device archived since keeps it).
        if ('refused' in r) throw new SetupRefused(r.refused, r.deviceId)
        await recordInTransaction(tx, now, {
          kind: 'device_setup',
          actor: `device:${r.device.id}`,
          ip,
          outcome: 'success',
          detail: { device_id: r.device.id },
        })
        return r
      })
    } catch (err) {
      if (!(err instanceof SetupRefused)) throw err
      await this.deps.audit.record({
        kind: 'device_setup',
        actor: err.deviceId === undefined ? 'device:unknown' : `device:${err.deviceId}`,
        ip,
        outcome: 'failure',
        detail: { reason: err.reason },
      })
      throw new NotFoundError('Unknown, used or expired set-up code')
    }
    if (done.ended) await this.deps.publishRevocation(done.ended)
    // A device's event exists (a foreign key): its name and time zone, for the scanner to show.
    const event = (await findEventSummary(db, done.device.event_id))!
    return {
      device_id: done.device.id,
      dev_mac: done.device.dev_mac,
      event_id: done.device.event_id,
      device_key: done.key,
      event: { uid: event.uid, name: event.name, timezone: event.timezone },
    }
  }

  /**
   * rule 15: the operator's session token for a device type its mode allows. Wrong credentials and a
   * disallowed combination are the same 401. The token is created once and returned again until the
   * operator logs out.
   */
  operatorToken(input: { email: string; password: string; dev_type: DevType; dev_mac: string }, ip: string) {
    return counted(this.deps.authEvents, 'login_device_operator', () => this.signInOperator(input, ip))
  }

  private async signInOperator(
    input: { email: string; password: string; dev_type: DevType; dev_mac: string },
    ip: string,
  ) {
    const { db, audit } = this.deps
    const user = await signInWithPassword(this.deps.passwords, {
      slots: [
        {
          backoffKey: passwordBudget('operator', input.email),
          find: () => findOperatorByEmail(db, input.email),
          storeHash: (u, hash) => updatePasswordHash(db, 'operator', u.id, hash),
        },
      ],
      password: input.password,
      // A device type the operator's mode does not allow is no sign-in: the count stays.
      admit: (u) => devTypeAllowed(input.dev_type, u.mode),
      onFailure: () =>
        audit.record({
          kind: 'operator_token',
          actor: `operator:${input.email.slice(0, 254)}`,
          ip,
          outcome: 'failure',
          detail: { dev_type: input.dev_type, dev_mac: input.dev_mac },
        }),
      failure: INVALID_OPERATOR_LOGIN,
    })
    const token = await this.sessionToken(user.id)
    await audit.record({
      kind: 'operator_token',
      actor: `operator:${user.id}`,
      ip,
      outcome: 'success',
      detail: { dev_type: input.dev_type, dev_mac: input.dev_mac },
    })
    return {
      user_id: user.id,
      event_id: user.event_id,
      email: user.email,
      token,
      mode: user.mode,
      dev_type: input.dev_type,
    }
  }

  private async sessionToken(userId: number): Promise<string> {
    const { db, clock, sealer } = this.deps
    // Two rounds cover a lost race with a concurrent call and a token sealed under a retired secret.
    for (let round = 0; round < 3; round++) {
      const existing = await findSession(db, userId)
      if (existing) {
        const token = sealer.open(existing.token_sealed, `operator:${userId}`)
        if (token !== null) return token
        // Sealed under a secret no longer configured: replace it (the only rotation besides logout).
        await deleteSession(db, userId, existing.token_hash)
        continue
      }
      const token = `${SESSION_PREFIX}${randomToken(32)}`
      const stored = await insertSession(db, {
        user_id: userId,
        token_hash: sha256Hex(token),
        token_sealed: sealer.seal(token, `operator:${userId}`),
        created_at: clock.now(),
      })
      if (stored) return token
      // Another request created the session first: hand out that one.
    }
    throw new Error('operator session could not be established')
  }

  /** Claims of a live session token for POST /tokens/verify, or null. */
  async resolveSession(token: string): Promise<Claims | null> {
    const row = await findSessionOperator(this.deps.db, sha256Hex(token))
    if (!row) return null
    const iat = Math.floor(this.deps.clock.now() / 1000)
    return {
      type: 'session',
      ...operatorGrant(row),
      jti: `session:${row.id}:${row.created_at}`,
      iat,
      // The token lives until logout; an answer is only good for the callers' cache window.
      exp: iat + SESSION_CLAIMS_WINDOW_SECONDS,
      mode: row.mode,
    }
  }

  /** Ends the operator's session token (logout); the next operator-token call issues a new one. */
  async endSession(userId: number): Promise<void> {
    await deleteSession(this.deps.db, userId)
  }
}
