import type { AuditLog } from '../audit/audit.store.js'
import { checkTotp, type TotpDeps } from '../mfa/mfa.service.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { safeEqual, sha256Hex } from '../platform/digest.js'
import { UnauthorizedError } from '../platform/errors.js'
import type { Sealer } from '../platform/keys.js'
import { type PasswordSignInDeps, signInWithPassword } from '../platform/password-sign-in.js'
import { randomToken } from '../platform/random.js'
import {
  deleteSession,
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
  /** An administrator's TOTP code is checked by the rules of `/admin/mfa/verify`, on its budget. */
  totp: TotpDeps
  /** Seals the sign-in waiting for its next step, kept in a cookie between the two forms. */
  signInSealer: Sealer
}

export interface Session {
  viewer: Viewer
  csrfToken: string
  tokenHash: string
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
  const name = input.username.trim()
  const account = await signInWithPassword(deps.passwords, {
    slots: accountSlots(deps.db, name),
    password: input.password,
    onFailure: () =>
      deps.audit.record({ kind: 'dashboard_login', actor: name.slice(0, 254), ip, outcome: 'failure' }),
    failure: INVALID_SIGN_IN,
  })
  const { viewer, secondStep } = account
  if (secondStep) return { step: secondStep, pending: sealPending(deps, viewer, secondStep) }
  return { step: 'done', ...(await openSession(deps, viewer, ip)) }
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
  const viewer = await openPending(deps, pending, 'totp')
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

async function openPending(deps: SessionDeps, sealed: string | undefined, step: SecondStep): Promise<Viewer> {
  const plain = sealed ? deps.signInSealer.open(sealed, PENDING_CONTEXT) : null
  const pending = plain === null ? null : (JSON.parse(plain) as Pending)
  const live = pending !== null && pending.step === step && pending.exp > deps.clock.now()
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
  })
  return { token, session: { viewer, csrfToken, tokenHash } }
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
  return { viewer, csrfToken: row.csrf_token, tokenHash }
}

export async function signOut(deps: Pick<SessionDeps, 'db'>, session: Session): Promise<void> {
  await deleteSession(deps.db, session.tokenHash)
}

export function csrfMatches(session: Session, given: string | undefined): boolean {
  return typeof given === 'string' && given.length > 0 && safeEqual(session.csrfToken, given)
}
