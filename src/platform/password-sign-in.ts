import type { Backoff } from './backoff.js'
import { UnauthorizedError } from './errors.js'
import { checkPassword, hashPassword } from './passwords.js'

/**
 * What every password sign-in shares, one per app: the per-account back-off, a hash checked where no
 * account is (so an unknown name costs the same time as a wrong password), and a counter of the hashes
 * checked (`wristband_password_checks_total`).
 */
export interface PasswordSignInDeps {
  backoff: Backoff
  dummyHash: Promise<string>
  onCheck: () => void
}

/**
 * The back-off budget of one account's password, by kind of account and sign-in name (unknown names
 * too, so a lock reveals nothing). Every sign-in that takes the password spends this one budget: the
 * dashboard and `/auth/login` count an administrator's failures together.
 */
export function passwordBudget(kind: string, name: string): string {
  return `login:${kind}:${name.trim().toLowerCase()}`
}

/** An account that signs in with a password; consumers may have none (`null`), which never matches. */
export interface PasswordAccount {
  password_hash: string | null
}

/** One kind of account a sign-in name may belong to. */
export interface AccountSlot<A extends PasswordAccount> {
  /** The account's budget (`passwordBudget`), known before anything is read. */
  backoffKey: string
  find(): Promise<A | null | undefined>
  /** Replaces the account's stored hash with a new one (an old bcrypt hash, weaker argon2 parameters). */
  storeHash(account: A, hash: string): Promise<void>
}

export interface PasswordAttempt<A extends PasswordAccount> {
  /**
   * The kinds of account the name may belong to, in order of precedence: the same slots for every
   * attempt of a flow, so that each attempt checks one hash per slot, whichever accounts exist.
   */
  slots: readonly AccountSlot<A>[]
  password: string
  /**
   * Whether the account whose password matched may sign in here (an operator's device type). A refusal
   * is a failure like a wrong password: the same answer after the same work, and the count stays.
   */
  admit?: (account: A) => boolean
  /** Records the failure (the audit entry) before the 401. */
  onFailure: () => Promise<void>
  /** The 401's message, the same for every failure. */
  failure: string
}

/**
 * The one password sign-in: staff at `/auth/login`, consumers, operators at `/devices/operator-token`
 * and the dashboard. The attempt is counted on every slot's budget before anything is read (so
 * simultaneous guesses meet the budget one by one); one hash is checked per slot, the dummy one where
 * the slot has no account, and all are checked whatever matched, so the time of an attempt does not
 * depend on which or how many accounts the name belongs to. The first slot whose account's password
 * matches (and is admitted) signs in: its budget is forgotten and an outdated hash replaced. Any other
 * outcome runs `onFailure` and throws the same 401.
 */
export async function signInWithPassword<A extends PasswordAccount>(
  deps: PasswordSignInDeps,
  attempt: PasswordAttempt<A>,
): Promise<A> {
  const { slots, password } = attempt
  await deps.backoff.countAttempt(slots.map((s) => s.backoffKey))
  const accounts = await Promise.all(slots.map((s) => s.find()))
  const dummy = await deps.dummyHash
  const checks = await Promise.all(
    accounts.map((a) => {
      deps.onCheck()
      return checkPassword(a?.password_hash ?? dummy, password)
    }),
  )
  const i = accounts.findIndex((a, j) => a?.password_hash != null && checks[j]!.ok)
  const account = accounts[i]
  const slot = slots[i]
  if (!account || !slot || (attempt.admit && !attempt.admit(account))) {
    await attempt.onFailure()
    throw new UnauthorizedError(attempt.failure)
  }
  await deps.backoff.recordSuccess(slot.backoffKey)
  if (checks[i]!.needsRehash) await slot.storeHash(account, await hashPassword(password))
  return account
}
