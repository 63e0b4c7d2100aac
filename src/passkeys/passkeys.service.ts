import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
} from '@simplewebauthn/server'
import type { AuditLog } from '../audit/audit.store.js'
import { dashboardUserPasswordHash } from '../dashboard/dashboard-users.store.js'
import { findAdminById, findNetworkManagerById, staffPasswordHash } from '../identities/identities.store.js'
import { type AuthEvents, counted } from '../platform/auth-events.js'
import type { Backoff } from '../platform/backoff.js'
import type { Clock } from '../platform/clock.js'
import { type Db, isUniqueViolation } from '../platform/db/database.js'
import { sha256Hex } from '../platform/digest.js'
import {
  BadRequestError,
  ConflictError,
  ForbiddenError,
  NotFoundError,
  UnauthorizedError,
} from '../platform/errors.js'
import { type MailMessage, queueMail } from '../platform/mail.js'
import { type PasswordSignInDeps, passwordBudget, signInWithPassword } from '../platform/password-sign-in.js'
import { randomToken } from '../platform/random.js'
import {
  advanceCounter,
  type ChallengeRow,
  countPasskeys,
  deletePasskey,
  deletePasskeysOf,
  findPasskeyByCredentialId,
  insertChallenge,
  insertPasskey,
  listPasskeys,
  type PasskeyKind,
  type PasskeyRow,
  type Subject,
  takeChallenge,
} from './passkeys.store.js'

export type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server'
export type { PasskeyKind, Subject } from './passkeys.store.js'

/** The relying party: the RP ID credentials are bound to and the origins pages may ask from. */
export interface RelyingParty {
  rpId: string
  origins: readonly string[]
}

/** `PASSKEYS_REQUIRED_FOR`: which administrators must sign in with a passkey once they have one. */
export type PasskeysRequiredFor = 'none' | 'superadmin' | 'admins'

/** An account that may hold passkeys, as its feature loads it (enabled accounts only). */
export interface PasskeyAccount extends Subject {
  /** E-mail address or username: the name of its password's back-off budget, shown by authenticators. */
  name: string
  /** A superadmin administrator, for the policy. */
  superadmin: boolean
}

/** Loads an enabled account by kind and id; null when it is gone, disabled or not served here. */
export type AccountLoader = (kind: PasskeyKind, id: number) => Promise<PasskeyAccount | null>

export interface PasskeyDeps {
  db: Db
  clock: Clock
  audit: AuditLog
  /** The one back-off of password sign-in: a passkey sign-in spends its account's password budget. */
  backoff: Backoff
  /** Undefined while passkeys are off (production without WEBAUTHN_RP_ID). */
  relyingParty: RelyingParty | undefined
  requiredFor: PasskeysRequiredFor
  accounts: AccountLoader
  authEvents: AuthEvents
  /** The one password sign-in's parts: the first passkey of an account needs its password. */
  passwords: PasswordSignInDeps
}

/**
 * @simplewebauthn/server, loaded at the first ceremony (Node's module cache keeps it): its X.509 and ASN.1
 * modules take 0.2 to 0.8 s to load on a busy machine, which every start and every worker would pay.
 */
const webauthn = () => import('@simplewebauthn/server')

/** How long a challenge may wait for its answer. */
export const CHALLENGE_MS = 5 * 60_000
const RP_NAME = 'wristband'
/**
 * EdDSA, ES256, RS256: what every platform's authenticators offer, and what Node 22 verifies. The
 * library's default adds ML-DSA, which Chromium's authenticator then picks, and which only newer Node
 * releases verify (the service runs on 22, 24 and 26).
 */
const SUPPORTED_ALGORITHMS = [-8, -7, -257]
const SIGN_IN_FAILED = 'Passkey sign-in failed'
const KINDS: readonly PasskeyKind[] = ['admin', 'dashboard_user', 'network_manager']

/** Why a registration or sign-in was refused, as the audit records it. */
export type Refusal =
  | 'challenge'
  | 'session'
  | 'origin'
  | 'rp_id'
  | 'user_verification'
  | 'counter'
  | 'signature'
  | 'unknown_credential'
  | 'other_account'
  | 'account'
  | 'duplicate'
  | 'invalid'
  | 'password'

/** Names the check of @simplewebauthn/server that failed, from its message (it throws plain Errors). */
export function refusalOf(err: unknown): Refusal {
  const message = err instanceof Error ? err.message : ''
  if (/challenge/i.test(message)) return 'challenge'
  if (/origin/i.test(message)) return 'origin'
  if (/RP ID/i.test(message)) return 'rp_id'
  if (/user could not be verified|User verification/i.test(message)) return 'user_verification'
  if (/counter/i.test(message)) return 'counter'
  if (/signature/i.test(message)) return 'signature'
  return 'invalid'
}

/** A WebAuthn refusal: recorded, then the route's error. */
class Refused extends Error {
  constructor(readonly reason: Refusal) {
    super(reason)
  }
}

function relyingParty(deps: PasskeyDeps): RelyingParty {
  if (!deps.relyingParty) throw new NotFoundError('Passkeys are off: the service has no WEBAUTHN_RP_ID')
  return deps.relyingParty
}

export const actorOf = (s: Subject) => `${s.kind}:${s.id}`
const userHandleOf = (s: Subject) => Buffer.from(`${s.kind}:${s.id}`).toString('base64url')
const sameSubject = (a: Subject, b: { kind: string | null; id: number | null }) =>
  a.kind === b.kind && a.id === b.id

/** Whether the policy makes this account sign in with a passkey (once it has one) instead of a TOTP code. */
export function inPolicyScope(requiredFor: PasskeysRequiredFor, account: PasskeyAccount): boolean {
  if (account.kind !== 'admin') return false
  return requiredFor === 'admins' || (requiredFor === 'superadmin' && account.superadmin)
}

export async function hasPasskey(deps: Pick<PasskeyDeps, 'db'>, subject: Subject): Promise<boolean> {
  return (await countPasskeys(deps.db, subject)) > 0
}

/**
 * What the policy asks of an account at sign-in: `passkey` (in scope and has one: password + TOTP is
 * refused), `register` (in scope without one: asked to register one), or nothing.
 */
export async function policyFor(
  deps: Pick<PasskeyDeps, 'db' | 'requiredFor'>,
  account: PasskeyAccount,
): Promise<'passkey' | 'register' | null> {
  if (!inPolicyScope(deps.requiredFor, account)) return null
  return (await hasPasskey(deps, account)) ? 'passkey' : 'register'
}

/**
 * The policy's refusal of a TOTP code (`/admin/mfa/verify`, the dashboard's code step): an administrator
 * in scope who has a passkey must use it. 403 `passkey_required`, audited.
 */
export async function refuseTotpUnderPolicy(deps: PasskeyDeps, adminId: number, ip: string): Promise<void> {
  if (deps.requiredFor === 'none') return
  const account = await deps.accounts('admin', adminId)
  if (!account || (await policyFor(deps, account)) !== 'passkey') return
  await deps.audit.record({
    kind: 'mfa_verify',
    actor: actorOf(account),
    ip,
    outcome: 'denied',
    detail: { reason: 'passkey_required' },
  })
  throw new ForbiddenError(
    'PASSKEYS_REQUIRED_FOR: this account signs in with its passkey, not with a TOTP code',
    'passkey_required',
  )
}

/** A new challenge for `purpose`, bound to a fresh flow token (what the asking session keeps). */
async function newChallenge(
  deps: PasskeyDeps,
  purpose: 'registration' | 'authentication',
  subject: Subject | null,
): Promise<{ flow: string; challenge: string }> {
  const flow = randomToken(32)
  const challenge = randomToken(32)
  const now = deps.clock.now()
  await insertChallenge(deps.db, {
    flow_hash: sha256Hex(flow),
    challenge_hash: sha256Hex(challenge),
    purpose,
    subject_kind: subject?.kind ?? null,
    subject_id: subject?.id ?? null,
    created_at: now,
    expires_at: now + CHALLENGE_MS,
  })
  return { flow, challenge }
}

/** The challenge of a flow, taken (single use), if it is live, of `purpose`, and bound as expected. */
async function takeLiveChallenge(
  deps: PasskeyDeps,
  flow: string | undefined,
  purpose: string,
): Promise<ChallengeRow> {
  const row = flow ? await takeChallenge(deps.db, sha256Hex(flow)) : undefined
  if (!row || row.purpose !== purpose || row.expires_at <= deps.clock.now()) throw new Refused('challenge')
  return row
}

/** The response's challenge must be the flow's: compared by hash, as stored. */
/**
 * What both ceremonies expect of an answer: the challenge of the flow (stored as its hash), one of the
 * relying party's origins and its id, and user verification.
 */
const expected = (rp: RelyingParty, row: ChallengeRow) => ({
  expectedChallenge: (challenge: string) => sha256Hex(challenge) === row.challenge_hash,
  expectedOrigin: [...rp.origins],
  expectedRPID: rp.rpId,
  requireUserVerification: true,
})

export interface PasskeyView {
  id: number
  name: string
  created_at: number
  last_used_at: number | null
  backed_up: boolean
  transports: string[]
}

export function viewOf(row: PasskeyRow): PasskeyView {
  return {
    id: row.id,
    name: row.name,
    created_at: row.created_at,
    last_used_at: row.last_used_at,
    backed_up: row.backed_up === 1,
    transports: row.transports ? row.transports.split(',') : [],
  }
}

export async function passkeysOf(deps: Pick<PasskeyDeps, 'db'>, subject: Subject): Promise<PasskeyView[]> {
  return (await listPasskeys(deps.db, subject)).map(viewOf)
}

/**
 * Registration options for an account: attestation `none`, user verification required, resident keys
 * preferred, the account's passkeys excluded (an authenticator is registered once).
 */
export async function startRegistration(
  deps: PasskeyDeps,
  account: PasskeyAccount,
): Promise<{ flow: string; options: PublicKeyCredentialCreationOptionsJSON }> {
  const rp = relyingParty(deps)
  const { flow, challenge } = await newChallenge(deps, 'registration', account)
  const existing = await listPasskeys(deps.db, account)
  const options = await (await webauthn()).generateRegistrationOptions({
    rpName: RP_NAME,
    rpID: rp.rpId,
    userName: account.name,
    userID: Buffer.from(userHandleOf(account), 'base64url'),
    challenge: Buffer.from(challenge, 'base64url'),
    timeout: CHALLENGE_MS,
    attestationType: 'none',
    excludeCredentials: existing.map((p) => ({ id: p.credential_id, ...transportsOf(p) })),
    authenticatorSelection: { residentKey: 'preferred', userVerification: 'required' },
    supportedAlgorithmIDs: SUPPORTED_ALGORITHMS,
  })
  return { flow, options }
}

const transportsOf = (p: PasskeyRow) =>
  p.transports ? { transports: p.transports.split(',') as ('usb' | 'internal')[] } : {}

/**
 * Verifies the authenticator's answer to a registration challenge and stores the passkey. Every
 * refusal (no such challenge or used before, another account's flow, wrong origin or RP ID, no user
 * verification, a credential registered already) is audited and answered 400; nothing is stored.
 */
export function finishRegistration(
  deps: PasskeyDeps,
  account: PasskeyAccount,
  input: RegistrationInput,
  ip: string,
): Promise<PasskeyView> {
  return counted(deps.authEvents, 'passkey_register', () => register(deps, account, input, ip))
}

interface RegistrationInput {
  flow: string | undefined
  response: RegistrationResponseJSON
  name?: string | undefined
  /** The account's password: needed for its first passkey. */
  password?: string | undefined
}

/**
 * The first passkey of an account needs its password, given with the answer (the fresh second factor
 * where MFA is on is the routes' guard): a session or token alone, left open or stolen, adds no second
 * factor the owner does not know of. Checked by the one password sign-in, on the account's password
 * budget, so guesses here lock the password as at sign-in. A wrong or missing password is the refusal
 * `password`.
 */
async function confirmFirstPasskey(deps: PasskeyDeps, account: PasskeyAccount, password: string | undefined) {
  if ((await countPasskeys(deps.db, account)) > 0) return
  if (password === undefined) throw new Refused('password')
  try {
    await signInWithPassword(deps.passwords, {
      slots: [
        {
          backoffKey: passwordBudget(account.kind, account.name),
          find: async () => ({ password_hash: await passwordHashOf(deps.db, account) }),
          storeHash: async () => {},
        },
      ],
      password,
      onFailure: async () => {},
      failure: 'password',
    })
  } catch (err) {
    if (err instanceof UnauthorizedError) throw new Refused('password')
    throw err
  }
}

function passwordHashOf(db: Db, account: Subject): Promise<string | null> {
  return account.kind === 'dashboard_user'
    ? dashboardUserPasswordHash(db, account.id)
    : staffPasswordHash(db, account.kind, account.id)
}

/** Where an account's notices go: administrators and network managers sign in with their e-mail address. */
function noticeAddress(account: PasskeyAccount): string | null {
  return account.kind === 'dashboard_user' ? null : account.name
}

/** The owner's notice of a passkey added or removed (`which`: `the passkey "…"`, `every passkey (3)`). */
function passkeyNotice(to: string, what: 'added' | 'removed', which: string, at: number): MailMessage {
  const when = new Date(at).toISOString()
  const where = what === 'added' ? 'to' : 'from'
  return {
    to,
    subject: `A passkey was ${what} ${where} your wristband account`,
    text:
      `${which[0]!.toUpperCase()}${which.slice(1)} was ${what} ${where} your wristband account at ${when}.\n\n` +
      (what === 'added'
        ? 'If this was not you, someone knows your password: reset it (the sign-in page, "Forgot your ' +
          'password?"), then ask your platform administrator to remove every passkey of the account ' +
          '(wristband admin reset-passkeys), or remove the passkey yourself on the dashboard (Passkeys) ' +
          'after signing in with a second factor of your own.\n'
        : 'If this was not you, contact your platform administrator at once.\n'),
  }
}

async function register(
  deps: PasskeyDeps,
  account: PasskeyAccount,
  input: RegistrationInput,
  ip: string,
): Promise<PasskeyView> {
  const rp = relyingParty(deps)
  try {
    await confirmFirstPasskey(deps, account, input.password)
    const row = await takeLiveChallenge(deps, input.flow, 'registration')
    if (!sameSubject(account, { kind: row.subject_kind, id: row.subject_id })) throw new Refused('session')
    const verification = await (await webauthn())
      .verifyRegistrationResponse({
        response: input.response,
        ...expected(rp, row),
      })
      .catch((err: unknown) => {
        throw new Refused(refusalOf(err))
      })
    if (!verification.verified) throw new Refused('invalid')
    const info = verification.registrationInfo
    if (await findPasskeyByCredentialId(deps.db, info.credential.id)) throw new Refused('duplicate')
    const now = deps.clock.now()
    const count = await countPasskeys(deps.db, account)
    const name = input.name?.trim() || `Passkey ${count + 1}`
    // The look-up above answers the usual case; the unique index, two registrations of one credential at once.
    const id = await insertPasskey(deps.db, {
      subject_kind: account.kind,
      subject_id: account.id,
      credential_id: info.credential.id,
      public_key: Buffer.from(info.credential.publicKey).toString('base64url'),
      counter: info.credential.counter,
      transports: (input.response.response.transports ?? []).join(','),
      name,
      aaguid: info.aaguid,
      backed_up: info.credentialBackedUp ? 1 : 0,
      created_at: now,
    }).catch((err: unknown) => {
      throw isUniqueViolation(err) ? new Refused('duplicate') : err
    })
    await deps.audit.record({
      kind: 'passkey_registered',
      actor: actorOf(account),
      ip,
      outcome: 'success',
      detail: { passkey_id: id, name, aaguid: info.aaguid },
    })
    const to = noticeAddress(account)
    if (to) await queueMail(deps.db, now, passkeyNotice(to, 'added', `the passkey "${name}"`, now))
    const stored = await findPasskeyByCredentialId(deps.db, info.credential.id)
    return viewOf(stored!)
  } catch (err) {
    if (!(err instanceof Refused)) throw err
    await deps.audit.record({
      kind: 'passkey_registered',
      actor: actorOf(account),
      ip,
      outcome: 'failure',
      detail: { reason: err.reason },
    })
    if (err.reason === 'duplicate') throw new ConflictError('This passkey is registered already')
    if (err.reason === 'password')
      throw new BadRequestError(
        "The first passkey of an account needs the account's password (password), given and right",
      )
    throw new BadRequestError(`The passkey could not be registered (${err.reason})`)
  }
}

/** Removes one of an account's passkeys, audited; 404 when the account has none with that id. */
export async function removePasskey(
  deps: PasskeyDeps,
  account: PasskeyAccount,
  passkeyId: number,
  ip: string,
): Promise<void> {
  const removed = await deletePasskey(deps.db, account, passkeyId)
  if (!removed) throw new NotFoundError('No such passkey')
  await deps.audit.record({
    kind: 'passkey_removed',
    actor: actorOf(account),
    ip,
    outcome: 'success',
    detail: { passkey_id: removed.id, name: removed.name },
  })
  const to = noticeAddress(account)
  const now = deps.clock.now()
  if (to) await queueMail(deps.db, now, passkeyNotice(to, 'removed', `the passkey "${removed.name}"`, now))
}

/**
 * Removes every passkey of an account, in the caller's transaction; answers how many. A removed dashboard
 * user's, and `wristband admin reset-passkeys` for an account that lost them (which also ends its sessions),
 * which tells the owner (`notice`: its address) when there were any.
 */
export async function removeAllPasskeys(
  tx: Db,
  subject: Subject,
  notice?: { to: string; now: number },
): Promise<number> {
  const removed = await deletePasskeysOf(tx, subject)
  if (notice && removed > 0)
    await queueMail(
      tx,
      notice.now,
      passkeyNotice(notice.to, 'removed', `every passkey (${removed})`, notice.now),
    )
  return removed
}

/**
 * Sign-in options. With an account (a second factor after the password), the challenge is bound to it
 * and its passkeys are listed; without one (a password-less first factor) the authenticator offers the
 * passkeys it holds for the RP ID (discoverable credentials, conditional UI).
 */
export async function startSignIn(
  deps: PasskeyDeps,
  account: Subject | null,
): Promise<{ flow: string; options: PublicKeyCredentialRequestOptionsJSON }> {
  const rp = relyingParty(deps)
  const { flow, challenge } = await newChallenge(deps, 'authentication', account)
  const allow = account ? await listPasskeys(deps.db, account) : []
  const options = await (await webauthn()).generateAuthenticationOptions({
    rpID: rp.rpId,
    challenge: Buffer.from(challenge, 'base64url'),
    timeout: CHALLENGE_MS,
    userVerification: 'required',
    ...(account ? { allowCredentials: allow.map((p) => ({ id: p.credential_id, ...transportsOf(p) })) } : {}),
  })
  return { flow, options }
}

/**
 * Checks the authenticator's answer to a sign-in challenge and answers the account it signs in. The
 * challenge is taken first (one try, whatever the answer); a challenge bound to an account (the second
 * factor) takes only that account's passkeys, and only from that account's session (`caller`). The try
 * is counted on the account's password budget (one back-off for every way in) before the signature is
 * checked; the counter must grow (a cloned authenticator shows an older one). Every refusal is
 * audited (`passkey_sign_in`, failure, with its reason) and answered 401; a locked account 429.
 */
export function finishSignIn(
  deps: PasskeyDeps,
  input: { flow: string | undefined; response: AuthenticationResponseJSON; caller?: Subject | undefined },
  ip: string,
): Promise<PasskeyAccount> {
  return counted(deps.authEvents, 'passkey_sign_in', () => checkAssertion(deps, input, ip))
}

async function checkAssertion(
  deps: PasskeyDeps,
  input: { flow: string | undefined; response: AuthenticationResponseJSON; caller?: Subject | undefined },
  ip: string,
): Promise<PasskeyAccount> {
  const rp = relyingParty(deps)
  let actor = input.caller ? actorOf(input.caller) : 'unknown'
  try {
    const row = await takeLiveChallenge(deps, input.flow, 'authentication')
    const bound = row.subject_kind === null ? null : { kind: row.subject_kind, id: row.subject_id }
    if (bound && (!input.caller || !sameSubject(input.caller, bound))) throw new Refused('session')
    const passkey = await findPasskeyByCredentialId(deps.db, input.response.id)
    if (!passkey) throw new Refused('unknown_credential')
    const owner = { kind: passkey.subject_kind as PasskeyKind, id: passkey.subject_id }
    if (!KINDS.includes(owner.kind)) throw new Refused('unknown_credential')
    actor = actorOf(owner)
    if (bound && !sameSubject(owner, bound)) throw new Refused('other_account')
    const handle = input.response.response.userHandle
    if (handle && handle !== userHandleOf(owner)) throw new Refused('other_account')
    const account = await deps.accounts(owner.kind, owner.id)
    if (!account) throw new Refused('account')
    const budget = passwordBudget(account.kind, account.name)
    await deps.backoff.countAttempt([budget])
    const verification = await (await webauthn())
      .verifyAuthenticationResponse({
        response: input.response,
        ...expected(rp, row),
        credential: {
          id: passkey.credential_id,
          publicKey: new Uint8Array(Buffer.from(passkey.public_key, 'base64url')),
          counter: passkey.counter,
        },
      })
      .catch((err: unknown) => {
        throw new Refused(refusalOf(err))
      })
    if (!verification.verified) throw new Refused('signature')
    const { newCounter } = verification.authenticationInfo
    if (!(await advanceCounter(deps.db, passkey.id, passkey.counter, newCounter, deps.clock.now())))
      throw new Refused('counter')
    await deps.backoff.recordSuccess(budget)
    await deps.audit.record({
      kind: 'passkey_sign_in',
      actor,
      ip,
      outcome: 'success',
      detail: { passkey_id: passkey.id, second_factor: bound !== null },
    })
    return account
  } catch (err) {
    if (!(err instanceof Refused)) throw err
    await deps.audit.record({
      kind: 'passkey_sign_in',
      actor,
      ip,
      outcome: 'failure',
      detail: { reason: err.reason },
    })
    throw new UnauthorizedError(SIGN_IN_FAILED)
  }
}

/** The accounts of the API's passkeys: administrators and network managers (enabled ones). */
export function staffAccounts(db: Db): AccountLoader {
  return async (kind, id) => {
    if (kind === 'admin') {
      const r = await findAdminById(db, id)
      return r ? { kind, id, name: r.email, superadmin: r.role === 'superadmin' } : null
    }
    if (kind === 'network_manager') {
      const r = await findNetworkManagerById(db, id)
      return r ? { kind, id, name: r.email, superadmin: false } : null
    }
    return null
  }
}
