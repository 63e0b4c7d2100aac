import type { AuditLog } from '../audit/audit.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { safeEqual, sha256Hex } from '../platform/digest.js'
import { UnauthorizedError } from '../platform/errors.js'
import { checkPassword, type PasswordSignInDeps } from '../platform/passwords.js'
import { randomToken } from '../platform/random.js'
import {
  deleteSession,
  findSession,
  insertSession,
  purgeExpiredSessions,
  touchSession,
} from './sessions.store.js'
import { findAccounts, loadViewer, type Viewer } from './viewers.js'

/**
 * A session ends after this long without a request. The event page refreshes its figures every
 * few seconds, so an open page keeps its session alive up to the absolute limit.
 */
export const SESSION_IDLE_MS = 2 * 60 * 60_000
/** A session ends this long after sign-in however active it is. */
export const SESSION_MAX_MS = 12 * 60 * 60_000
/** Activity is written at most this often, not on every figure refresh. */
const TOUCH_EVERY_MS = 60_000

export interface SessionDeps extends PasswordSignInDeps {
  db: Db
  clock: Clock
  audit: AuditLog
}

export interface Session {
  viewer: Viewer
  csrfToken: string
  tokenHash: string
}

export const INVALID_SIGN_IN = 'Incorrect username or password'

/** Checks a username (or e-mail) and password; on success opens a session and returns its cookie value. */
export async function signIn(
  deps: SessionDeps,
  input: { username: string; password: string },
  ip: string,
): Promise<{ token: string; session: Session }> {
  const name = input.username.trim()
  const backoffKey = `dashboard:${name.toLowerCase()}`
  await deps.backoff.countAttempt(backoffKey)
  const accounts = await findAccounts(deps.db, name)
  let viewer: Viewer | undefined
  if (accounts.length === 0) await checkPassword(await deps.dummyHash, input.password)
  for (const account of accounts) {
    if ((await checkPassword(account.password_hash, input.password)).ok) {
      viewer = account.viewer
      break
    }
  }
  if (!viewer) {
    await deps.audit.record({
      kind: 'dashboard_login',
      actor: name.slice(0, 254),
      ip,
      outcome: 'failure',
    })
    throw new UnauthorizedError(INVALID_SIGN_IN)
  }
  await deps.backoff.recordSuccess(backoffKey)
  await deps.audit.record({
    kind: 'dashboard_login',
    actor: `${viewer.kind}:${viewer.id}`,
    ip,
    outcome: 'success',
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
