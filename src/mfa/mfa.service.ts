import { Secret, TOTP } from 'otpauth'
import type { AuditLog } from '../audit/audit.store.js'
import { loadGrant } from '../identities/identities.store.js'
import type { Backoff } from '../platform/backoff.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { BadRequestError, UnauthorizedError } from '../platform/errors.js'
import { queueMail } from '../platform/mail.js'
import type { TokenResponse, TokenService } from '../tokens/token.service.js'
import { acceptActiveStep, findMfaAdmin, promotePending, savePending } from './mfa.store.js'
import type { SecretBox } from './secret-box.js'

export interface MfaDeps {
  db: Db
  clock: Clock
  tokens: TokenService
  audit: AuditLog
  box: SecretBox
  /** Per-administrator back-off on wrong codes, so guessing is slow from any number of addresses. */
  backoff: Backoff
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
 * pending secret is dropped; the active one keeps working until then.
 */
export async function setupMfa(deps: MfaDeps, adminId: number, ip: string): Promise<MfaSetup> {
  const admin = await findMfaAdmin(deps.db, adminId)
  if (!admin) throw new UnauthorizedError()
  const secret = new Secret({ size: SECRET_BYTES })
  const totp = new TOTP({ ...TOTP_PARAMS, label: admin.email, secret })
  await savePending(deps.db, admin.id, deps.box.seal(secret.base32, context(admin.id)), deps.clock.now())
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

/**
 * Checks a code against the pending secret (which then becomes active and switches MFA on), else
 * against the active one. A code is accepted once: its step must be later than the last one used.
 * Success issues a token pair whose access token carries `mfa_verified_at`.
 */
export async function verifyMfa(
  deps: MfaDeps,
  adminId: number,
  code: string,
  ip: string,
): Promise<TokenResponse> {
  const { db, clock, box, audit } = deps
  const admin = await findMfaAdmin(db, adminId)
  if (!admin) throw new UnauthorizedError()
  const actor = `admin:${admin.id}`
  const backoffKey = `mfa:admin:${admin.id}`
  await deps.backoff.assertAllowed(backoffKey)
  const now = clock.now()

  let accepted = false
  let replayed = false
  const pending = admin.mfa_pending_secret ? box.open(admin.mfa_pending_secret, context(admin.id)) : null
  const pendingStep = pending === null ? null : matchStep(pending, code, now)
  if (pending !== null && admin.mfa_pending_secret && pendingStep !== null) {
    const sealed = admin.mfa_pending_secret
    const replaced = admin.mfa_secret !== null
    const active = box.seal(pending, context(admin.id))
    accepted = await db.transaction().execute(async (tx) => {
      if (!(await promotePending(tx, admin.id, sealed, active, pendingStep, now))) return false
      await queueMail(tx, now, mfaNotice(admin.email, replaced))
      return true
    })
    if (accepted)
      await audit.record({ kind: 'mfa_enabled', actor, ip, outcome: 'success', detail: { replaced } })
  } else if (admin.mfa_secret) {
    const active = box.open(admin.mfa_secret, context(admin.id))
    const step = active === null ? null : matchStep(active, code, now)
    // A secret sealed under a signing secret being rotated out is sealed again under the current one.
    const resealed =
      active !== null && box.isStale(admin.mfa_secret) ? box.seal(active, context(admin.id)) : undefined
    accepted = step !== null && (await acceptActiveStep(db, admin.id, admin.mfa_secret, step, resealed))
    replayed = step !== null && !accepted
  }
  if (!accepted) {
    const reason = replayed ? 'replay' : 'wrong_code'
    await audit.record({ kind: 'mfa_verify', actor, ip, outcome: 'failure', detail: { reason } })
    await deps.backoff.recordFailure(backoffKey)
    throw new BadRequestError(WRONG_CODE)
  }
  await deps.backoff.recordSuccess(backoffKey)
  await audit.record({ kind: 'mfa_verify', actor, ip, outcome: 'success' })
  const grant = await loadGrant(db, 'admin', admin.id)
  if (!grant) throw new UnauthorizedError()
  return deps.tokens.issuePair(grant, { mfa_verified_at: Math.floor(now / 1000) })
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
