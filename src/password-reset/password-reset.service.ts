import type { AuditLog } from '../audit/audit.store.js'
import { findAdminByEmail, findAdminById } from '../identities/identities.store.js'
import { type AuthEvents, type AuthNote, counted } from '../platform/auth-events.js'
import type { Clock } from '../platform/clock.js'
import type { Config } from '../platform/config.js'
import type { Db } from '../platform/db/database.js'
import { sha256Hex } from '../platform/digest.js'
import { GoneError, TooManyRequestsError } from '../platform/errors.js'
import { enqueue } from '../platform/jobs/jobs.js'
import { hashPassword } from '../platform/passwords.js'
import type { EndSessions } from '../tokens/authority.js'
import { changePassword } from './password-change.service.js'
import { consumeToken, countRequest, findLiveToken, pruneRequests } from './password-reset.store.js'
import { RESET_MAIL_JOB, type ResetMailPayload } from './reset-mail.js'

export interface PasswordResetDeps {
  db: Db
  clock: Clock
  /** The token authority's: the reset ends every session of the account in its transaction. */
  endSessions: EndSessions
  audit: AuditLog
  config: Pick<Config, 'PASSWORD_RESET_HOURLY_QUOTA'>
  authEvents: AuthEvents
}

const HOUR_MS = 3_600_000
/** One answer for every reset link that does not work, so none can be told apart. */
const INVALID_LINK = 'This password reset link is invalid or has expired'

/**
 * Queues the reset e-mail of this address and answers the same whether an administrator has it or
 * not: the hourly quota counts per submitted address, known or not, and both cases do the same work
 * here (count, queue a job). The job finds the administrator, mints the link and sends it (reset-mail.ts).
 */
export function requestReset(deps: PasswordResetDeps, email: string, ip: string): Promise<void> {
  return counted(deps.authEvents, 'password_reset_request', (note) => queueReset(deps, email, ip, note))
}

async function queueReset(deps: PasswordResetDeps, email: string, ip: string, note: AuthNote): Promise<void> {
  const { db, clock, config, audit } = deps
  const address = email.trim().toLowerCase()
  // Only for the audit record, after the answer is decided; the same query either way.
  const admin = await findAdminByEmail(db, address)
  const actor = admin ? `admin:${admin.id}` : `admin:${email.slice(0, 254)}`
  const quota = config.PASSWORD_RESET_HOURLY_QUOTA
  const refusedForMs = await db.transaction().execute(async (tx) => {
    const now = clock.now()
    const waitMs = await countRequest(tx, sha256Hex(address), now, HOUR_MS, quota)
    if (waitMs !== null) return waitMs
    await enqueue(tx, now, {
      kind: RESET_MAIL_JOB,
      payload: { email: address, requestedAt: now } satisfies ResetMailPayload,
    })
    return null
  })
  await pruneRequests(db, clock.now() - HOUR_MS)
  if (refusedForMs !== null) {
    await audit.record({
      kind: 'password_reset_requested',
      actor,
      ip,
      outcome: 'denied',
      detail: { reason: 'hourly_quota' },
    })
    throw new TooManyRequestsError(
      quota,
      Math.max(1, Math.ceil(refusedForMs / 1000)),
      'Too many password reset requests for this address; try again later',
    )
  }
  await audit.record({
    kind: 'password_reset_requested',
    actor,
    ip,
    outcome: admin ? 'success' : 'failure',
    ...(admin ? {} : { detail: { reason: 'unknown_email' } }),
  })
  if (!admin) note.reason = 'unknown_account'
}

/**
 * Sets a new password through a reset link: the link is used up, and `changePassword` does the rest
 * (every other outstanding link retired, every session and token of the administrator ended, a notice
 * e-mailed). Any link that does not work (unknown, expired, used, administrator gone) gets the same 410.
 */
export function confirmReset(
  deps: PasswordResetDeps,
  token: string,
  newPassword: string,
  ip: string,
): Promise<void> {
  return counted(deps.authEvents, 'password_reset', () => resetPassword(deps, token, newPassword, ip))
}

async function resetPassword(
  deps: PasswordResetDeps,
  token: string,
  newPassword: string,
  ip: string,
): Promise<void> {
  const { db, clock, audit } = deps
  const invalid = async () => {
    await audit.record({ kind: 'password_reset_completed', ip, outcome: 'failure' })
    return new GoneError(INVALID_LINK)
  }
  const live = await findLiveToken(db, sha256Hex(token), clock.now())
  // A link of an administrator removed or disabled since it was sent changes nothing.
  const admin = live && (await findAdminById(db, live.admin_id))
  if (!live || !admin) throw await invalid()
  const found = { id: live.id, admin_id: live.admin_id, email: admin.email }
  const hash = await hashPassword(newPassword)
  const done = await db.transaction().execute(async (tx) => {
    const now = clock.now()
    if (!(await consumeToken(tx, found.id, now))) return undefined
    return changePassword(tx, deps, {
      owner: { kind: 'admin', id: found.admin_id, email: found.email },
      passwordHash: hash,
      way: 'reset_link',
      now,
    })
  })
  if (!done) throw await invalid()
  await done.publish()
  await audit.record({
    kind: 'password_reset_completed',
    actor: `admin:${found.admin_id}`,
    ip,
    outcome: 'success',
  })
}
