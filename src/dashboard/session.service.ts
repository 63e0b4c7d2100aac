import type { AuditLog } from '../audit/audit.store.js'
import { checkTotp, type TotpDeps } from '../mfa/mfa.service.js'
import {
  type AccountLoader,
  type AuthenticationResponseJSON,
  finishSignIn,
  type PasskeyAccount,
  type PasskeyDeps,
  policyFor,
} from '../passkeys/passkeys.service.js'
import { type AuthEvents, counted } from '../platform/auth-events.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { safeEqual, sha256Hex } from '../platform/digest.js'
import { UnauthorizedError } from '../platform/errors.js'
import type { Sealer } from '../platform/keys.js'
import { type PasswordSignInDeps, signInWithPassword } from '../platform/password-sign-in.js'
import { randomToken } from '../platform/random.js'
import type { SessionStore } from '../tokens/authority.js'
import {
  deleteSession,
  deleteSessionsOf,
  findSession,
  insertSession,
  purgeExpiredSessions,
  touchSession,
} from './sessions.store.js'
import { accountSlots, loadViewer, type SecondStep, type Viewer, type ViewerKind } from './viewers.js'

/**
 * A session ends after this long without a request. The event page refreshes its figures every
 * few seconds, so an open page keeps its session alive up to the absolute limit.
 */
export const SESSION_IDLE_MS = 2 * 60 * 60_000
/** A session ends this long after sign-in however active it is. */
export const SESSION_MAX_MS = 12 * 60 * 60_000
/** Activity is written at most this often, not on every figure refresh. */
const TOUCH_EVERY_MS = 60_000

export interface SessionDeps {
  db: Db
  clock: Clock
  audit: AuditLog
  passwords: PasswordSignInDeps
  authEvents: AuthEvents
  /** An administrator's TOTP code is checked by the rules of `/admin/mfa/verify`, on its budget. */
  totp: TotpDeps
  /** Seals the sign-in waiting for its next step, kept in a cookie between the two forms. */
  signInSealer: Sealer
  /** Passkeys of every kind of dashboard account (`accounts` loads viewers). */
  passkeys: PasskeyDeps
}

export interface Session {
  viewer: Viewer
  csrfToken: string
  tokenHash: string
  /** When the session's second factor (TOTP code or passkey) was given; null: the password alone. */
  mfaVerifiedAt: number | null
}

/**
 * Ends an account's dashboard sessions in the caller's transaction: one of the token authority's
 * `sessionStores`, in the app and on the command line alike, so `endSessions` ends them with the tokens.
 */
export const endDashboardSessions: SessionStore = deleteSessionsOf

/** The dashboard's accounts of every kind, for its passkeys. */
export function viewerAccounts(db: Db): AccountLoader {
  return async (kind, id) => {
    const viewer = await loadViewer(db, kind, id)
    return viewer && passkeyAccountOf(viewer)
  }
}

/** A viewer as an account that may hold passkeys. */
export function passkeyAccountOf(viewer: Viewer): PasskeyAccount {
  return {
    kind: viewer.kind,
    id: viewer.id,
    name: viewer.label,
    superadmin: viewer.kind === 'admin' && viewer.allEvents,
  }
}

export const INVALID_SIGN_IN = 'Incorrect username or password'

/** How long the step after the password may take before the sign-in starts again. */
export const SECOND_STEP_MS = 5 * 60_000

/** A signed-in session (its cookie value), or the step the account needs next with the sealed sign-in. */
export type SignInResult =
  | { step: 'done'; token: string; session: Session }
  | { step: SecondStep; pending: string }

/**
 * Checks a username (or e-mail) and password (`signInWithPassword`: one budget per password, shared
 * with `/auth/login`). An account with a second step (an administrator whose MFA is on) gets no session
 * yet: the answer is the step and the sealed sign-in, which the step's form sends back.
 */
export async function signIn(
  deps: SessionDeps,
  input: { username: string; password: string },
  ip: string,
): Promise<SignInResult> {
  const result = await counted(deps.authEvents, 'login_dashboard', () => checkPassword(deps, input, ip))
  if (result.step !== 'done') deps.authEvents.count('mfa_challenge', 'success', 'sign_in')
  return result
}

async function checkPassword(
  deps: SessionDeps,
  input: { username: string; password: string },
  ip: string,
): Promise<SignInResult> {
  const name = input.username.trim()
  const account = await signInWithPassword(deps.passwords, {
    slots: accountSlots(deps.db, name),
    password: input.password,
    onFailure: () =>
      deps.audit.record({ kind: 'dashboard_login', actor: name.slice(0, 254), ip, outcome: 'failure' }),
    failure: INVALID_SIGN_IN,
  })
  const { viewer } = account
  // PASSKEYS_REQUIRED_FOR: an administrator in scope who has a passkey gives it instead of a TOTP code.
  const policy = await policyFor(deps.passkeys, passkeyAccountOf(viewer))
  const secondStep = policy === 'passkey' ? 'passkey' : account.secondStep
  if (secondStep) return { step: secondStep, pending: sealPending(deps, viewer, secondStep) }
  return { step: 'done', ...(await openSession(deps, viewer, ip)) }
}

/**
 * A passkey sign-in (`finishSignIn`: one try per challenge, counters, the account's password budget).
 * After the password (`pending`, any second step: a TOTP step may be answered with a passkey too) the
 * challenge was bound to that account and only its passkeys count; without one it is the first factor.
 * Either way the session opens with its second factor given.
 */
export async function signInWithPasskey(
  deps: SessionDeps,
  input: { pending: string | undefined; flow: string | undefined; response: AuthenticationResponseJSON },
  ip: string,
): Promise<{ token: string; session: Session }> {
  const bound = input.pending ? await openPending(deps, input.pending, ['totp', 'passkey']) : undefined
  const caller = bound && { kind: bound.kind, id: bound.id }
  const account = await finishSignIn(
    deps.passkeys,
    { flow: input.flow, response: input.response, caller },
    ip,
  )
  const viewer = await loadViewer(deps.db, account.kind, account.id)
  if (!viewer) throw new UnauthorizedError('The sign-in has expired; sign in again')
  return openSession(deps, viewer, ip, 'passkey')
}

/** The viewer a sealed sign-in waits for (for the passkey step's options), or 401. */
export async function pendingViewer(deps: SessionDeps, pending: string | undefined): Promise<Viewer> {
  return openPending(deps, pending, ['totp', 'passkey'])
}

/**
 * The TOTP step of a sign-in waiting for it: the code is checked as at `/admin/mfa/verify` (counted on
 * the administrator's back-off first, each code accepted once; a wrong one is 400). A missing,
 * altered or expired sign-in, or an account gone since, is 401: the sign-in starts again.
 */
export async function signInWithTotp(
  deps: SessionDeps,
  pending: string | undefined,
  code: string,
  ip: string,
): Promise<{ token: string; session: Session }> {
  const viewer = await openPending(deps, pending, ['totp'])
  await checkTotp(deps.totp, viewer.id, code, ip, false)
  return openSession(deps, viewer, ip, 'totp')
}

const PENDING_CONTEXT = 'dashboard-sign-in'

interface Pending {
  kind: ViewerKind
  id: number
  step: SecondStep
  exp: number
}

function sealPending(deps: SessionDeps, viewer: Viewer, step: SecondStep): string {
  const pending: Pending = { kind: viewer.kind, id: viewer.id, step, exp: deps.clock.now() + SECOND_STEP_MS }
  return deps.signInSealer.seal(JSON.stringify(pending), PENDING_CONTEXT)
}

async function openPending(
  deps: SessionDeps,
  sealed: string | undefined,
  steps: readonly SecondStep[],
): Promise<Viewer> {
  const plain = sealed ? deps.signInSealer.open(sealed, PENDING_CONTEXT) : null
  const pending = plain === null ? null : (JSON.parse(plain) as Pending)
  const live = pending !== null && steps.includes(pending.step) && pending.exp > deps.clock.now()
  const viewer = live ? await loadViewer(deps.db, pending.kind, pending.id) : null
  if (!viewer) throw new UnauthorizedError('The sign-in has expired; sign in again')
  return viewer
}

/** Opens a session for a signed-in account; its cookie value is returned, only its hash stored. */
async function openSession(
  deps: SessionDeps,
  viewer: Viewer,
  ip: string,
  secondStep?: SecondStep,
): Promise<{ token: string; session: Session }> {
  await deps.audit.record({
    kind: 'dashboard_login',
    actor: `${viewer.kind}:${viewer.id}`,
    ip,
    outcome: 'success',
    ...(secondStep ? { detail: { second_step: secondStep } } : {}),
  })
  const now = deps.clock.now()
  await purgeExpiredSessions(deps.db, now)
  // A fresh value at every sign-in, so a session id planted before sign-in is never promoted.
  const token = randomToken(32)
  const tokenHash = sha256Hex(token)
  const csrfToken = randomToken(32)
  await insertSession(deps.db, {
    token_hash: tokenHash,
    subject_kind: viewer.kind,
    subject_id: viewer.id,
    csrf_token: csrfToken,
    created_at: now,
    last_seen_at: now,
    expires_at: now + SESSION_IDLE_MS,
    mfa_verified_at: secondStep ? now : null,
  })
  return { token, session: { viewer, csrfToken, tokenHash, mfaVerifiedAt: secondStep ? now : null } }
}

/** The live session of a cookie value, or null when it is unknown, expired or its account is gone. */
export async function resumeSession(
  deps: Pick<SessionDeps, 'db' | 'clock'>,
  token: string,
): Promise<Session | null> {
  const now = deps.clock.now()
  const tokenHash = sha256Hex(token)
  const row = await findSession(deps.db, tokenHash, now)
  if (!row) return null
  const viewer = await loadViewer(deps.db, row.subject_kind, row.subject_id)
  if (!viewer) {
    await deleteSession(deps.db, tokenHash)
    return null
  }
  if (now - row.last_seen_at >= TOUCH_EVERY_MS) {
    await touchSession(
      deps.db,
      tokenHash,
      now,
      Math.min(now + SESSION_IDLE_MS, row.created_at + SESSION_MAX_MS),
    )
  }
  return { viewer, csrfToken: row.csrf_token, tokenHash, mfaVerifiedAt: row.mfa_verified_at ?? null }
}

export async function signOut(deps: Pick<SessionDeps, 'db'>, session: Session): Promise<void> {
  await deleteSession(deps.db, session.tokenHash)
}

export function csrfMatches(session: Session, given: string | undefined): boolean {
  return typeof given === 'string' && given.length > 0 && safeEqual(session.csrfToken, given)
}
