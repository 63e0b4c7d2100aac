import { LockedOut } from './backoff.js'
import { AppError } from './errors.js'

/**
 * Authentication events, counted by kind for dashboards and alerts
 * (`wristband_auth_events_total{event, outcome, reason}`; docs/observability.md). Every label value
 * comes from the closed lists below, never from a request: no account, address or free text.
 *
 * Each event names the reason its 401 (and 400, 404: a wrong code, an unknown link) stands for; the
 * other failures are told apart by the error the flow ended with (`reasonOf`).
 */
export const AUTH_EVENTS = {
  login_admin: { refused: 'invalid_credentials' },
  login_operator: { refused: 'invalid_credentials' },
  login_network_manager: { refused: 'invalid_credentials' },
  login_consumer_password: { refused: 'invalid_credentials' },
  login_consumer_otp: { refused: 'invalid_credentials' },
  login_idp: { refused: 'invalid_credentials' },
  login_dashboard: { refused: 'invalid_credentials' },
  login_device: { refused: 'invalid_credentials' },
  login_device_operator: { refused: 'invalid_credentials' },
  refresh: { refused: 'invalid_token' },
  mfa_challenge: { refused: 'invalid_token' },
  mfa_verify: { refused: 'invalid_credentials' },
  passkey_sign_in: { refused: 'invalid_credentials' },
  passkey_register: { refused: 'invalid_credentials' },
  password_reset_request: { refused: 'unknown_account' },
  password_reset: { refused: 'invalid_token' },
} as const satisfies Record<string, { refused: AuthReason }>

export type AuthEvent = keyof typeof AUTH_EVENTS

/**
 * Why an event ended as it did. `none` on a success; `locked` when the per-account back-off refused
 * the attempt (lockout); `reuse_detected` a refresh token presented again (its family is revoked);
 * `replayed` a TOTP code given twice; `unknown_account` a reset asked for an address of nobody (answered
 * as for a known one); `sign_in` and `fresh_mfa` say why a second factor was asked for.
 */
export const AUTH_REASONS = [
  'none',
  'invalid_credentials',
  'invalid_token',
  'invalid_request',
  'unknown_account',
  'locked',
  'rate_limited',
  'reuse_detected',
  'replayed',
  'mfa_required',
  'passkey_required',
  'not_permitted',
  'unavailable',
  'error',
  'sign_in',
  'fresh_mfa',
] as const

export type AuthReason = (typeof AUTH_REASONS)[number]
export type AuthOutcome = 'success' | 'failure'

/**
 * The series worth showing at 0 before anything happened (so that `rate()` and alerts see them from
 * the start): each event's success and its usual refusals; the rare ones appear when they happen.
 */
interface AuthSeries {
  event: AuthEvent
  outcome: AuthOutcome
  reason: AuthReason
}

export const AUTH_EVENT_SERIES: readonly AuthSeries[] = (Object.keys(AUTH_EVENTS) as AuthEvent[]).flatMap(
  (event): AuthSeries[] =>
    event === 'mfa_challenge'
      ? [
          { event, outcome: 'success', reason: 'sign_in' },
          { event, outcome: 'success', reason: 'fresh_mfa' },
        ]
      : [
          { event, outcome: 'success', reason: 'none' },
          { event, outcome: 'failure', reason: AUTH_EVENTS[event].refused },
          { event, outcome: 'failure', reason: 'locked' },
        ],
)

/** Where authentication events are counted (the app's metrics; `wristband_auth_events_total`). */
export interface AuthEvents {
  count(event: AuthEvent, outcome: AuthOutcome, reason: AuthReason): void
}

/** Counts nothing: for a token service built without metrics (a benchmark of verify alone). */
export const UNCOUNTED: AuthEvents = { count() {} }

/** The reason a flow of `event` that threw `err` failed. */
export function reasonOf(event: AuthEvent, err: unknown): AuthReason {
  if (err instanceof LockedOut) return 'locked'
  if (!(err instanceof AppError)) return 'error'
  switch (err.code) {
    case 'unauthorized':
    case 'bad_request':
    case 'not_found':
    case 'gone':
    case 'conflict':
      return AUTH_EVENTS[event].refused
    case 'validation_failed':
      return 'invalid_request'
    case 'rate_limit_exceeded':
      return 'rate_limited'
    case 'mfa_required':
    case 'require_mfa':
      return 'mfa_required'
    case 'passkey_required':
      return 'passkey_required'
    case 'forbidden':
      return 'not_permitted'
    case 'service_unavailable':
      return 'unavailable'
    default:
      return 'error'
  }
}

/**
 * What a counted flow may say about its own failure: its reason when it knows better than its error,
 * or that it failed although it answers as if not (a reset requested for an unknown address).
 */
export interface AuthNote {
  reason?: AuthReason
}

/**
 * Runs one authentication flow and counts it once: a failure when it throws or noted a reason (the
 * reason noted, else its error's: `reasonOf`), else a success.
 */
export async function counted<T>(
  events: AuthEvents,
  event: AuthEvent,
  run: (note: AuthNote) => Promise<T>,
): Promise<T> {
  const note: AuthNote = {}
  let result: T
  try {
    result = await run(note)
  } catch (err) {
    events.count(event, 'failure', note.reason ?? reasonOf(event, err))
    throw err
  }
  events.count(event, note.reason ? 'failure' : 'success', note.reason ?? 'none')
  return result
}
