import type { AuditLog } from '../audit/audit.store.js'
import { findStaffByEmail, type StaffRole, updatePasswordHash } from '../identities/identities.store.js'
import { type AuthEvents, counted } from '../platform/auth-events.js'
import type { Db } from '../platform/db/database.js'
import { type PasswordSignInDeps, passwordBudget, signInWithPassword } from '../platform/password-sign-in.js'
import type { TokenResponse, TokenService } from '../tokens/token.service.js'

export interface LoginDeps {
  db: Db
  tokens: TokenService
  audit: AuditLog
  passwords: PasswordSignInDeps
  authEvents: AuthEvents
  /** PASSKEYS_REQUIRED_FOR: what an administrator must do next (`policyFor`), told in the answer. */
  passkeyPolicy?: (adminId: number) => Promise<'passkey' | 'register' | null>
}

export type LoginAnswer = TokenResponse & { passkey_policy?: 'use_passkey' | 'register_passkey' }

/**
 * E-mail and password sign-in for administrators, operators and network managers. Every failure
 * (unknown e-mail, wrong password, wrong role) is the same 401 after the same amount of work.
 */
export async function loginStaff(
  deps: LoginDeps,
  input: { email: string; password: string; role: StaffRole },
  ip: string,
): Promise<LoginAnswer> {
  return counted(deps.authEvents, `login_${input.role}`, () => signInStaff(deps, input, ip))
}

async function signInStaff(
  deps: LoginDeps,
  input: { email: string; password: string; role: StaffRole },
  ip: string,
): Promise<LoginAnswer> {
  const { db, audit } = deps
  const { email, password, role } = input
  const account = await signInWithPassword(deps.passwords, {
    slots: [
      {
        backoffKey: passwordBudget(role, email),
        find: () => findStaffByEmail(db, role, email),
        storeHash: (a, hash) => updatePasswordHash(db, role, a.id, hash),
      },
    ],
    password,
    onFailure: () =>
      audit.record({ kind: 'login', actor: `${role}:${email.slice(0, 254)}`, ip, outcome: 'failure' }),
    failure: 'Incorrect email or password',
  })
  await audit.record({ kind: 'login', actor: `${role}:${account.id}`, ip, outcome: 'success' })
  const pair = await deps.tokens.issuePair(account.grant)
  const policy = role === 'admin' ? await deps.passkeyPolicy?.(account.id) : null
  if (!policy) return pair
  return { ...pair, passkey_policy: policy === 'passkey' ? 'use_passkey' : 'register_passkey' }
}
