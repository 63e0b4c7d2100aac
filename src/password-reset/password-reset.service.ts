import type { AuditLog } from '../audit/audit.store.js'
import { deleteSessionsOf } from '../dashboard/sessions.store.js'
import type { Clock } from '../platform/clock.js'
import type { Config } from '../platform/config.js'
import type { Db } from '../platform/db/database.js'
import { GoneError, TooManyRequestsError } from '../platform/errors.js'
import { type MailMessage, queueMail } from '../platform/mail.js'
import { hashPassword } from '../platform/passwords.js'
import { randomToken, sha256Hex } from '../platform/random.js'
import type { TokenService } from '../tokens/token.service.js'
import {
  consumeToken,
  findAdminByEmail,
  findUsableToken,
  insertResetToken,
  lockAdmin,
  recentRequests,
  retireTokens,
  setAdminPassword,
} from './password-reset.store.js'

export interface PasswordResetDeps {
  db: Db
  clock: Clock
  tokens: TokenService
  audit: AuditLog
  config: Pick<Config, 'PASSWORD_RESET_EXPIRE_MINUTES' | 'PASSWORD_RESET_HOURLY_QUOTA' | 'PUBLIC_BASE_URL'>
}

const HOUR_MS = 3_600_000
/** One answer for every reset link that does not work, so none can be told apart. */
const INVALID_LINK = 'This password reset link is invalid or has expired'

/**
 * Sends a reset link to the administrator with this e-mail, if there is one. The link and the mail
 * job are written in one transaction; the job runner delivers it, retrying while the mail server is
 * down. Only a known administrator over the hourly quota is refused (429).
 */
export async function requestReset(deps: PasswordResetDeps, email: string, ip: string): Promise<void> {
  const { db, clock, config, audit } = deps
  const admin = await findAdminByEmail(db, email.trim().toLowerCase())
  if (!admin) {
    await audit.record({
      kind: 'password_reset_requested',
      actor: `admin:${email.slice(0, 254)}`,
      ip,
      outcome: 'failure',
      detail: { reason: 'unknown_email' },
    })
    return
  }
  const actor = `admin:${admin.id}`
  const quota = config.PASSWORD_RESET_HOURLY_QUOTA
  const token = randomToken(32)
  const refused = await db.transaction().execute(async (tx) => {
    const now = clock.now()
    await lockAdmin(tx, admin.id)
    const recent = await recentRequests(tx, admin.id, now - HOUR_MS)
    if (recent.length >= quota) return { retryAfterMs: recent[recent.length - quota]! + HOUR_MS - now }
    await insertResetToken(tx, {
      admin_id: admin.id,
      token_hash: sha256Hex(token),
      expires_at: now + config.PASSWORD_RESET_EXPIRE_MINUTES * 60_000,
      created_at: now,
    })
    await queueMail(tx, now, resetMail(admin.email, resetLink(config.PUBLIC_BASE_URL, token), config))
    return null
  })
  if (refused) {
    await audit.record({
      kind: 'password_reset_requested',
      actor,
      ip,
      outcome: 'denied',
      detail: { reason: 'hourly_quota' },
    })
    throw new TooManyRequestsError(
      quota,
      Math.max(1, Math.ceil(refused.retryAfterMs / 1000)),
      'Too many password reset requests for this account; try again later',
    )
  }
  await audit.record({ kind: 'password_reset_requested', actor, ip, outcome: 'success' })
}

/**
 * Sets a new password through a reset link: the link is used up, every other outstanding link,
 * every dashboard session and every refresh token of the administrator is revoked, and a notice is
 * e-mailed. Any link that does
 * not work (unknown, expired, used, administrator gone) gets the same 410.
 */
export async function confirmReset(
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
  const found = await findUsableToken(db, sha256Hex(token), clock.now())
  if (!found) throw await invalid()
  const hash = await hashPassword(newPassword)
  const done = await db.transaction().execute(async (tx) => {
    const now = clock.now()
    if (!(await consumeToken(tx, found.id, now))) return false
    await setAdminPassword(tx, found.admin_id, hash, now)
    await deleteSessionsOf(tx, 'admin', found.admin_id)
    await retireTokens(tx, found.admin_id, now)
    await queueMail(tx, now, passwordChangedMail(found.email))
    return true
  })
  if (!done) throw await invalid()
  await deps.tokens.revokeSubject('admin', found.admin_id)
  await audit.record({
    kind: 'password_reset_completed',
    actor: `admin:${found.admin_id}`,
    ip,
    outcome: 'success',
  })
}

function resetLink(base: string, token: string): string {
  return `${base.replace(/\/+$/, '')}/admin/password-reset/${token}`
}

function resetMail(
  to: string,
  link: string,
  config: Pick<Config, 'PASSWORD_RESET_EXPIRE_MINUTES'>,
): MailMessage {
  const minutes = config.PASSWORD_RESET_EXPIRE_MINUTES
  const text =
    `Someone asked to reset the password of your wristband administrator account.\n\n` +
    `Choose a new password here (the link works once, for ${minutes} minutes):\n${link}\n\n` +
    `If it was not you, ignore this message; your password stays as it is.\n`
  const html =
    `<p>Someone asked to reset the password of your wristband administrator account.</p>` +
    `<p><a href="${escapeHtml(link)}">Choose a new password</a> (the link works once, for ${minutes} minutes).</p>` +
    `<p>If it was not you, ignore this message; your password stays as it is.</p>`
  return { to, subject: 'Reset your wristband password', text, html }
}

function passwordChangedMail(to: string): MailMessage {
  return {
    to,
    subject: 'Your wristband password was changed',
    text:
      'The password of your wristband administrator account was changed through a reset link, and every ' +
      'session was signed out.\n\nIf this was not you, contact your platform administrator at once.\n',
  }
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}
