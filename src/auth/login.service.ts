import type { AuditLog } from '../audit/audit.store.js'
import { findStaffByEmail, type StaffRole, updatePasswordHash } from '../identities/identities.store.js'
import type { Db } from '../platform/db/database.js'
import { UnauthorizedError } from '../platform/errors.js'
import { checkPassword, hashPassword, type PasswordSignInDeps } from '../platform/passwords.js'
import type { TokenResponse, TokenService } from '../tokens/token.service.js'

export interface LoginDeps extends PasswordSignInDeps {
  db: Db
  tokens: TokenService
  audit: AuditLog
}

const INVALID = 'Incorrect email or password'

/**
 * E-mail and password sign-in for administrators, operators and network managers. Every failure
 * (unknown e-mail, wrong password, wrong role) is the same 401 after the same amount of work.
 */
export async function loginStaff(
  deps: LoginDeps,
  input: { email: string; password: string; role: StaffRole },
  ip: string,
): Promise<TokenResponse> {
  const backoffKey = `login:${input.role}:${input.email.trim().toLowerCase()}`
  await deps.backoff.countAttempt(backoffKey)
  const account = await findStaffByEmail(deps.db, input.role, input.email)
  const check = await checkPassword(account?.password_hash ?? (await deps.dummyHash), input.password)
  if (!account || !check.ok) {
    await deps.audit.record({
      kind: 'login',
      actor: `${input.role}:${input.email.slice(0, 254)}`,
      ip,
      outcome: 'failure',
    })
    throw new UnauthorizedError(INVALID)
  }
  await deps.backoff.recordSuccess(backoffKey)
  if (check.needsRehash)
    await updatePasswordHash(deps.db, input.role, account.id, await hashPassword(input.password))
  await deps.audit.record({ kind: 'login', actor: `${input.role}:${account.id}`, ip, outcome: 'success' })
  return deps.tokens.issuePair(account.grant)
}
