import { Secret, TOTP } from 'otpauth'
import type { AuditLog } from '../audit/audit.store.js'
import {
  acceptActiveStep,
  findMfaAdmin,
  loadGrant,
  type MfaAdmin,
  promotePending,
  savePending,
} from '../identities/identities.store.js'
import { type AuthEvents, type AuthNote, counted } from '../platform/auth-events.js'
import type { Backoff } from '../platform/backoff.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { BadRequestError, UnauthorizedError } from '../platform/errors.js'
import type { Sealer } from '../platform/keys.js'
import { queueMail } from '../platform/mail.js'
import type { TokenResponse, TokenService } from '../tokens/token.service.js'

/** What checking a TOTP code needs: `/admin/mfa/verify` and the dashboard's sign-in. */
export interface TotpDeps {
  db: Db
  clock: Clock
  audit: AuditLog
  /** Opens the stored secrets (the `mfa-secret` sealer of `SecretKeys`). */
  sealer: Sealer
  /** Per-administrator back-off on wrong codes, so guessing is slow from any number of addresses. */
  backoff: Backoff
  authEvents: AuthEvents
  /**
   * PASSKEYS_REQUIRED_FOR: throws (403 `passkey_required`) when the administrator must give a passkey
   * instead of a code.
   */
  passkeyPolicy?: (adminId: number, ip: string) => Promise<void>
}

export interface MfaDeps extends TotpDeps {
  tokens: TokenService
}

/** What authenticator apps expect: RFC 6238 with SHA-1, 6 digits, 30-second steps. */
const TOTP_PARAMS = { issuer: 'wristband', algorithm: 'SHA1', digits: 6, period: 30 } as const
const PERIOD_MS = TOTP_PARAMS.period * 1000
/** 160 bits, the HMAC-SHA-1 key size RFC 4226 recommends. */
const SECRET_BYTES = 20
/** One step either side of now, for phone clocks that drift. */
const WINDOW = 1

const WRONG_CODE = 'Invalid MFA code'

const context = (adminId: number) => `administrators.mfa_secret:${adminId}`

export interface MfaSetup {
  secret: string
  qr_uri: string
}

/**
 * Starts enrolment: a fresh secret that stays pending until a code from it is verified. Any earlier
 * pending secret is dropped; the active one keeps working until then. While MFA is enabled the route's
 * guard (`credentialGuard`) lets only a session with a fresh MFA verification start a re-enrolment: a
 * password alone must never be enough to replace the second factor (docs/specification.md).
 */
export async function setupMfa(deps: MfaDeps, adminId: number, ip: string): Promise<MfaSetup> {
  const admin = await findMfaAdmin(deps.db, adminId)
  if (!admin) throw new UnauthorizedError()
  const secret = new Secret({ size: SECRET_BYTES })
  const totp = new TOTP({ ...TOTP_PARAMS, label: admin.email, secret })
  await savePending(deps.db, admin.id, deps.sealer.seal(secret.base32, context(admin.id)), deps.clock.now())
  await deps.audit.record({ kind: 'mfa_setup', actor: `admin:${admin.id}`, ip, outcome: 'success' })
  return { secret: secret.base32, qr_uri: totp.toString() }
}

/** The time step a code belongs to, or null when it matches no step within the window. */
function matchStep(base32: string, code: string, now: number): number | null {
  const delta = TOTP.validate({
    ...TOTP_PARAMS,
    token: code,
    secret: Secret.fromBase32(base32),
    timestamp: now,
    window: WINDOW,
  })
  return delta === null ? null : Math.floor(now / PERIOD_MS) + delta
}

type CodeCheck = 'accepted' | 'wrong' | 'replayed'

/** A code of the pending secret makes it the active one and switches MFA on, with a notice e-mail. */
async function tryPending(
  deps: TotpDeps,
  admin: MfaAdmin,
  code: string,
  now: number,
  ip: string,
): Promise<CodeCheck> {
  const sealed = admin.mfa_pending_secret
  const pending = sealed ? deps.sealer.open(sealed, context(admin.id)) : null
  const step = pending === null ? null : matchStep(pending, code, now)
  if (sealed === null || pending === null || step === null) return 'wrong'
  const replaced = admin.mfa_secret !== null
  const active = deps.sealer.seal(pending, context(admin.id))
  const promoted = await deps.db.transaction().execute(async (tx) => {
    if (!(await promotePending(tx, admin.id, sealed, active, step, now))) return false
    await queueMail(tx, now, mfaNotice(admin.email, replaced))
    return true
  })
  if (!promoted) return 'wrong'
  await deps.audit.record({
    kind: 'mfa_enabled',
    actor: `admin:${admin.id}`,
    ip,
    outcome: 'success',
    detail: { replaced },
  })
  return 'accepted'
}

/** A code of the active secret is accepted once: its step must be later than the last one used. */
async function tryActive(deps: TotpDeps, admin: MfaAdmin, code: string, now: number): Promise<CodeCheck> {
  const sealed = admin.mfa_secret
  const active = sealed ? deps.sealer.open(sealed, context(admin.id)) : null
  const step = active === null ? null : matchStep(active, code, now)
  if (sealed === null || active === null || step === null) return 'wrong'
  // A secret sealed under a signing secret being rotated out is sealed again under the current one.
  const resealed = deps.sealer.isStale(sealed) ? deps.sealer.seal(active, context(admin.id)) : undefined
  return (await acceptActiveStep(deps.db, admin.id, sealed, step, resealed)) ? 'accepted' : 'replayed'
}

/**
 * Checks a code against the pending secret, else against the active one. Success issues a token pair
 * whose access token carries `mfa_verified_at`; a wrong or replayed code is 400 and counts towards
 * the administrator's back-off. While MFA is enabled the pending secret is considered only from a
 * session with a fresh MFA verification (`freshMfa`), so only the enabled secret turns a password-only
 * session into a fresh one, and a pending secret replaces it only when its owner proved the old one.
 */
export async function verifyMfa(
  deps: MfaDeps,
  adminId: number,
  code: string,
  ip: string,
  freshMfa: boolean,
): Promise<TokenResponse> {
  const verifiedAt = await checkTotp(deps, adminId, code, ip, freshMfa)
  const grant = await loadGrant(deps.db, 'admin', adminId)
  if (!grant) throw new UnauthorizedError()
  return deps.tokens.issuePair(grant, { mfa_verified_at: Math.floor(verifiedAt / 1000) })
}

/**
 * The rules of a TOTP code, wherever one is given (`/admin/mfa/verify`, the dashboard's sign-in): the
 * try is counted on the administrator's one back-off budget before anything is read, so simultaneous
 * guesses meet the count in order; a code is accepted once (its step must be later than the last one
 * used); the pending secret counts only as `verifyMfa` says. A wrong or replayed code is 400; an
 * accepted one answers the time it was checked at.
 */
export function checkTotp(
  deps: TotpDeps,
  adminId: number,
  code: string,
  ip: string,
  freshMfa: boolean,
): Promise<number> {
  return counted(deps.authEvents, 'mfa_verify', (note) => checkCode(deps, adminId, code, ip, freshMfa, note))
}

async function checkCode(
  deps: TotpDeps,
  adminId: number,
  code: string,
  ip: string,
  freshMfa: boolean,
  note: AuthNote,
): Promise<number> {
  await deps.passkeyPolicy?.(adminId, ip)
  const backoffKey = `mfa:admin:${adminId}`
  await deps.backoff.countAttempt([backoffKey])
  const admin = await findMfaAdmin(deps.db, adminId)
  if (!admin) throw new UnauthorizedError()
  const actor = `admin:${admin.id}`
  const now = deps.clock.now()
  const pendingCounts = admin.mfa_secret === null || freshMfa
  let check: CodeCheck = pendingCounts ? await tryPending(deps, admin, code, now, ip) : 'wrong'
  if (check === 'wrong') check = await tryActive(deps, admin, code, now)
  if (check !== 'accepted') {
    await deps.audit.record({ kind: 'mfa_verify', actor, ip, outcome: 'failure', detail: { reason: check } })
    if (check === 'replayed') note.reason = 'replayed'
    throw new BadRequestError(WRONG_CODE)
  }
  await deps.backoff.recordSuccess(backoffKey)
  await deps.audit.record({ kind: 'mfa_verify', actor, ip, outcome: 'success' })
  return now
}

function mfaNotice(to: string, replaced: boolean) {
  const what = replaced
    ? 'The authenticator app for your wristband administrator account was replaced.'
    : 'Two-factor authentication was switched on for your wristband administrator account.'
  const text = `${what}\n\nIf this was not you, reset your password and tell your platform administrator at once.\n`
  return {
    to,
    subject: replaced ? 'Your authenticator app was replaced' : 'Two-factor authentication enabled',
    text,
  }
}
