import { updateDashboardUser } from '../dashboard/dashboard-users.store.js'
import { setAdminPassword } from '../identities/identities.store.js'
import { countPasskeys } from '../passkeys/passkeys.store.js'
import type { Db } from '../platform/db/database.js'
import { type MailMessage, queueMail } from '../platform/mail.js'
import type { EndedSessions, EndSessions } from '../tokens/authority.js'
import { retireTokens } from './password-reset.store.js'

/** Whose password changes: an administrator (who has an e-mail address) or a dashboard user (who has none). */
export type PasswordOwner =
  | { kind: 'admin'; id: number; email: string }
  | { kind: 'dashboard_user'; id: number }

/** How the password was changed, as the notice words it. */
export type PasswordChangeWay = 'reset_link' | 'dashboard' | 'command_line'

const HOW: Record<PasswordChangeWay, string> = {
  reset_link: 'through a password reset link',
  dashboard: 'by an administrator on the dashboard',
  command_line: "by an operator on the server's command line (wristband admin reset-password)",
}

/**
 * The one way a password changes (a reset link, a dashboard user's new password, `wristband admin
 * reset-password`), in the caller's transaction: the new hash is stored, every open reset link of the
 * account is retired, every session and token of the account ends (`endSessions`: refresh tokens,
 * dashboard sessions and the token generation) and the owner is sent a notice through the mail queue,
 * which commits with the change (a dashboard user has no address: the audit record is the trace).
 * Passkeys stay (a forgotten password is no lost passkey); the notice says how many there are and how
 * to remove them. The caller publishes the returned end after the commit (`publish()`).
 */
export async function changePassword(
  tx: Db,
  deps: { endSessions: EndSessions },
  change: { owner: PasswordOwner; passwordHash: string; way: PasswordChangeWay; now: number },
): Promise<EndedSessions> {
  const { owner, passwordHash, way, now } = change
  if (owner.kind === 'admin') {
    await setAdminPassword(tx, owner.id, passwordHash, now)
    // Reset links are an administrator's only: an unused one must not set the password again.
    await retireTokens(tx, owner.id, now)
  } else {
    await updateDashboardUser(tx, owner.id, { password_hash: passwordHash })
  }
  const ended = await deps.endSessions(tx, owner.kind, owner.id)
  if (owner.kind === 'admin') {
    const passkeys = await countPasskeys(tx, { kind: 'admin', id: owner.id })
    await queueMail(tx, now, passwordChangedMail(owner.email, way, passkeys))
  }
  return ended
}

function passwordChangedMail(to: string, way: PasswordChangeWay, passkeys: number): MailMessage {
  const kept =
    passkeys === 0
      ? ''
      : `\n\nYour account's ${passkeys === 1 ? 'passkey stays' : `${passkeys} passkeys stay`} registered and ` +
        'signs in as before. If you did not register ' +
        (passkeys === 1 ? 'it' : 'all of them') +
        ', remove the ones you do not know on the dashboard (Passkeys), or ask your platform administrator ' +
        'to remove every passkey of the account (wristband admin reset-passkeys).'
  return {
    to,
    subject: 'Your wristband password was changed',
    text:
      `The password of your wristband administrator account was changed ${HOW[way]}, and every session ` +
      `and token of the account was ended.${kept}\n\nIf this was not you, contact your platform ` +
      'administrator at once.\n',
  }
}
