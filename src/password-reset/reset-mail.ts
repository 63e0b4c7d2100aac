import { findAdminByEmail } from '../identities/identities.store.js'
import type { Clock } from '../platform/clock.js'
import type { Config } from '../platform/config.js'
import type { Db } from '../platform/db/database.js'
import { sha256Hex } from '../platform/digest.js'
import type { JobHandler } from '../platform/jobs/jobs.js'
import { MAIL_RETRY_SCHEDULE, type MailMessage, type MailTransport } from '../platform/mail.js'
import { randomToken } from '../platform/random.js'
import { deleteResetToken, insertResetToken } from './password-reset.store.js'

export const RESET_MAIL_JOB = 'password-reset-mail'

/** What a reset request queues: the submitted address (lower-cased), known or not, and when. */
export interface ResetMailPayload {
  email: string
  requestedAt: number
}

export interface ResetMailDeps {
  db: Db
  clock: Clock
  mail: MailTransport
  config: Pick<Config, 'PASSWORD_RESET_EXPIRE_MINUTES' | 'PUBLIC_BASE_URL'>
}

/**
 * Sends the reset e-mail of one request. The token is minted here, when the message goes out, and
 * only its hash is stored: the link never rests in the database, not even in the job queue. An
 * address no enabled administrator has gets nothing; the request that queued it answered the same.
 * A failed send removes its token (the retry mints another); a link that would arrive already
 * expired is not sent.
 */
export function resetMailJob(deps: ResetMailDeps): JobHandler<ResetMailPayload> {
  return {
    retrySchedule: MAIL_RETRY_SCHEDULE,
    async run({ email, requestedAt }) {
      const { db, clock, config } = deps
      const admin = await findAdminByEmail(db, email)
      if (!admin) return
      const expiresAt = requestedAt + config.PASSWORD_RESET_EXPIRE_MINUTES * 60_000
      if (expiresAt <= clock.now()) return
      const token = randomToken(32)
      const tokenHash = sha256Hex(token)
      await insertResetToken(db, {
        admin_id: admin.id,
        token_hash: tokenHash,
        expires_at: expiresAt,
        created_at: requestedAt,
      })
      try {
        await deps.mail.send(resetMail(admin.email, resetLink(config.PUBLIC_BASE_URL, token), config))
      } catch (err) {
        await deleteResetToken(db, tokenHash)
        throw err
      }
    },
  }
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

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}
