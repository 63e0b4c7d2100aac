import type { AuditLog } from '../audit/audit.store.js'
import type { Grant, Role } from '../identities/grants.js'
import { loadGrant } from '../identities/identities.store.js'
import type { Metrics } from '../metrics/metrics.js'
import { type AuthNote, counted, UNCOUNTED } from '../platform/auth-events.js'
import type { Clock } from '../platform/clock.js'
import type { Config } from '../platform/config.js'
import type { Db } from '../platform/db/database.js'
import { UnauthorizedError } from '../platform/errors.js'
import { randomToken } from '../platform/random.js'
import { traced } from '../platform/tracing.js'
import { accountGenerationOf, type Claims, deviceGenerationOf } from './claims.js'
import type { JwtCodec } from './jwt.js'
import { findRefresh, insertRefresh, markRotated, revokeFamily } from './refresh.store.js'
import type { RevocationStore } from './revocations.js'

export interface TokenResponse {
  access_token: string
  refresh_token: string
  token_type: 'bearer'
  expires_in: number
}

/**
 * Resolves a credential that is not a JWT (an API key, an operator session token) to its claims,
 * or null when it is unknown or revoked. Features register one per prefix.
 */
export type CredentialResolver = (credential: string) => Claims | null | Promise<Claims | null>

/**
 * Ends a credential that is not a JWT on behalf of whoever presents it (POST /oauth2/revoke: possession
 * is the authority); answers its claims when it was good and is ended now, else null.
 */
export type CredentialRevoker = (credential: string) => Promise<Claims | null>

export interface TokenServiceDeps {
  db: Db
  jwt: JwtCodec
  revocations: RevocationStore
  clock: Clock
  audit: AuditLog
  /** Absent in benchmarks of the verify path alone. */
  metrics?: Pick<Metrics, 'tokenIssued' | 'tokenVerified' | 'authEvents'>
  config: Pick<
    Config,
    'ACCESS_TOKEN_EXPIRE_MINUTES' | 'REFRESH_TOKEN_EXPIRE_DAYS' | 'OFFLINE_TOKEN_EXPIRE_HOURS'
  > &
    Partial<Pick<Config, 'REVOCATION_POLL_MS'>>
}

/** Refresh tokens whose good row is remembered at once (a verify of one of them reads no row). */
const REMEMBERED_REFRESH = 10_000

export class TokenService {
  private readonly resolvers: [string, CredentialResolver][] = []
  private readonly revokers: [string, CredentialRevoker][] = []
  private readonly logoutListeners: ((caller: Claims) => Promise<void>)[] = []
  readonly accessLifetime: number
  readonly refreshLifetime: number
  readonly offlineLifetime: number
  /**
   * Refresh tokens found good in their row, and until when (ms) that answer is reused: the fleet's
   * revocation time (REVOCATION_POLL_MS, at most 1 s), so verifying a refresh token costs a row read
   * at most once a second. A rotation, logout or ended family on this instance forgets at once; one
   * made elsewhere is seen within that time, as a revocation is.
   */
  private readonly refreshGood = new Map<string, number>()
  private readonly refreshGoodMs: number

  constructor(private readonly deps: TokenServiceDeps) {
    this.accessLifetime = deps.config.ACCESS_TOKEN_EXPIRE_MINUTES * 60
    this.refreshLifetime = deps.config.REFRESH_TOKEN_EXPIRE_DAYS * 86400
    this.offlineLifetime = deps.config.OFFLINE_TOKEN_EXPIRE_HOURS * 3600
    this.refreshGoodMs = Math.min(1000, deps.config.REVOCATION_POLL_MS ?? 1000)
  }

  registerCredential(prefix: string, resolver: CredentialResolver, revoker?: CredentialRevoker): void {
    this.resolvers.push([prefix, resolver])
    if (revoker) this.revokers.push([prefix, revoker])
  }

  /** Features with sessions of their own (operator session tokens) end them when the subject logs out. */
  onLogout(listener: (caller: Claims) => Promise<void>): void {
    this.logoutListeners.push(listener)
  }

  /**
   * Issues an access token and starts (or continues) a refresh-token family. An `mfa_verified_at` in
   * `extra` is kept with the family, so the access tokens of later refreshes carry it too.
   */
  async issuePair(
    grant: Grant,
    extra: Record<string, unknown> = {},
    familyId?: string,
  ): Promise<TokenResponse> {
    const access = this.deps.jwt.issue({ type: 'access', ...grant, ...extra }, this.accessLifetime)
    const refresh = this.deps.jwt.issue(
      { type: 'refresh', sub: grant.sub, role: grant.role, account_gen: grant.account_gen },
      this.refreshLifetime,
    )
    await insertRefresh(this.deps.db, {
      jti: refresh.claims.jti,
      family_id: familyId ?? randomToken(16),
      subject_kind: grant.role,
      subject_id: Number(grant.sub),
      expires_at: refresh.claims.exp * 1000,
      created_at: this.deps.clock.now(),
      mfa_verified_at: typeof extra.mfa_verified_at === 'number' ? extra.mfa_verified_at : null,
    })
    this.deps.metrics?.tokenIssued('access')
    this.deps.metrics?.tokenIssued('refresh')
    return {
      access_token: access.token,
      refresh_token: refresh.token,
      token_type: 'bearer',
      expires_in: this.accessLifetime,
    }
  }

  issueOffline(grant: Grant, extra: Record<string, unknown>): { token: string; claims: Claims } {
    this.deps.metrics?.tokenIssued('offline')
    return this.deps.jwt.issue({ type: 'offline', ...grant, ...extra }, this.offlineLifetime)
  }

  /** Verifies a JWT of one of `types` (signature, aud, iss, exp); no revocation check. */
  verifyJwt(token: string, types: readonly string[]): Claims {
    const claims = this.deps.jwt.tryVerify(token)
    if (!claims || !types.includes(claims.type)) throw new UnauthorizedError()
    return claims
  }

  /**
   * The route guard's check: a JWT of one of `types` that is good now and not revoked (its jti, its
   * account's token generation, or for a device's offline token its device's token generation); 401
   * otherwise.
   */
  async authenticate(token: string, types: readonly string[]): Promise<Claims> {
    const claims = this.verifyJwt(token, types)
    const revoked = traced('token.revocation_check', { 'token.type': claims.type }, () =>
      this.revokedNow(claims),
    )
    if (await revoked) throw new UnauthorizedError()
    return claims
  }

  /** Whether the revocation list refuses a JWT: by its jti, its account's generation or its device's. */
  private revokedNow(claims: Claims): boolean | Promise<boolean> {
    return this.withAccount(claims, this.withDevice(claims, this.deps.revocations.isRevoked(claims.jti)))
  }

  /**
   * Whether the revocation list refuses the token, given whether it refuses it otherwise: also when
   * the token generation of its account it was minted under has ended (disable, an administrator's
   * password reset, an MFA reset, `wristband admin end-tokens`). A map read, no allocation, while the
   * list answers from memory.
   */
  private withAccount(claims: Claims, otherwise: boolean | Promise<boolean>): boolean | Promise<boolean> {
    if (otherwise === true) return true
    const byAccount = this.deps.revocations.isAccountEnded(
      claims.role,
      claims.sub,
      accountGenerationOf(claims),
    )
    if (otherwise === false || byAccount === true) return byAccount
    return Promise.all([otherwise, byAccount]).then(([a, b]) => a || b)
  }

  /**
   * Whether the revocation list holds the token, given whether it holds its jti: for an offline token
   * bound to a device, also the device's token generation it was issued in. Synchronous while the list
   * answers from memory.
   */
  private withDevice(claims: Claims, byJti: boolean | Promise<boolean>): boolean | Promise<boolean> {
    const generation = deviceGenerationOf(claims)
    if (generation === undefined || byJti === true) return byJti
    const byDevice = this.deps.revocations.isRevoked(generation)
    if (byJti === false) return byDevice
    return Promise.all([byJti, byDevice]).then(([a, b]) => a || b)
  }

  /**
   * The claims of any credential the service issues when it is good now, else null: JWTs are checked
   * for signature, aud, iss, exp and the revocation list (a device's offline token also by its device's
   * token generation); other credentials by their resolver.
   *
   * The hot path of POST /tokens/verify: for a JWT it runs synchronously (no promise) while the
   * revocation list answers from memory, and a remembered token allocates nothing.
   *
   * `refreshTokens` false: a refresh token is answered null without reading its row, for a caller to
   * whom a refresh token is never good (RFC 7662 introspection by a resource server).
   */
  introspect(token: string, refreshTokens = true): Claims | null | Promise<Claims | null> {
    const resolve = this.resolverFor(token)
    if (resolve) {
      const resolved = resolve(token)
      return resolved instanceof Promise ? resolved.then((c) => this.outcome(c)) : this.outcome(resolved)
    }
    const claims = this.deps.jwt.tryVerify(token)
    if (!claims) return this.outcome(null)
    // Before the look-up, which may be a read that nobody would await (the list still loading).
    if (claims.type === 'refresh' && !refreshTokens) return this.outcome(null)
    const byJti = this.deps.revocations.isRevoked(claims.jti)
    if (claims.type === 'refresh') return this.refreshState(claims, this.withAccount(claims, byJti))
    // Access tokens, the bulk of verify calls, are bound to no device: the account's generation is one
    // map read more, nothing else.
    const revoked = this.withAccount(
      claims,
      claims.type === 'offline' ? this.withDevice(claims, byJti) : byJti,
    )
    if (revoked === false) return this.outcome(claims)
    if (revoked === true) return this.outcome(null)
    return revoked.then((r) => this.outcome(r ? null : claims))
  }

  /**
   * A refresh token is good while its row is neither rotated nor revoked: its family's state, read
   * from the database, refuses it (not a revocation entry per refresh held in every instance's memory).
   * Refresh tokens are rarely verified; access tokens never come here.
   */
  private refreshState(
    claims: Claims,
    byJti: boolean | Promise<boolean>,
  ): Claims | null | Promise<Claims | null> {
    if (byJti === true) return this.outcome(null)
    const now = this.deps.clock.now()
    const until = this.refreshGood.get(claims.jti)
    if (byJti === false && until !== undefined && until > now) return this.outcome(claims)
    return this.readRefreshRow(claims, byJti, now)
  }

  private async readRefreshRow(claims: Claims, byJti: boolean | Promise<boolean>, now: number) {
    if (await byJti) return this.outcome(null)
    const row = await findRefresh(this.deps.db, claims.jti)
    const good = row !== undefined && row.rotated_at === null && row.revoked_at === null
    this.refreshGood.delete(claims.jti)
    if (good) {
      if (this.refreshGood.size >= REMEMBERED_REFRESH)
        this.refreshGood.delete(this.refreshGood.keys().next().value!)
      this.refreshGood.set(claims.jti, now + this.refreshGoodMs)
    }
    return this.outcome(good ? claims : null)
  }

  /** Forgets every remembered good refresh token (a family or an account's sessions ended here). */
  forgetRefreshChecks(): void {
    this.refreshGood.clear()
  }

  private resolverFor(token: string): CredentialResolver | undefined {
    for (const [prefix, resolve] of this.resolvers) if (token.startsWith(prefix)) return resolve
    return undefined
  }

  private outcome(claims: Claims | null): Claims | null {
    if (claims) this.deps.metrics?.tokenVerified(claims.type, 'valid')
    else this.deps.metrics?.tokenVerified('unknown', 'invalid')
    return claims
  }

  /**
   * Rotates a refresh token. Of two concurrent rotations of one token exactly one wins; presenting a
   * token that was already rotated is treated as theft and revokes its whole family.
   */
  refresh(token: string, ip: string): Promise<TokenResponse> {
    return counted(this.deps.metrics?.authEvents ?? UNCOUNTED, 'refresh', (note) =>
      this.rotate(token, ip, note),
    )
  }

  private async rotate(token: string, ip: string, note: AuthNote): Promise<TokenResponse> {
    const claims = this.verifyJwt(token, ['refresh'])
    const { db, clock } = this.deps
    const row = await findRefresh(db, claims.jti)
    if (!row || row.revoked_at !== null) throw new UnauthorizedError()
    const now = clock.now()
    this.refreshGood.delete(claims.jti)
    if (row.rotated_at !== null || !(await markRotated(db, claims.jti, now))) {
      await this.revokeFamily(row.family_id)
      await this.deps.audit.record({
        kind: 'refresh_reuse_detected',
        actor: `${row.subject_kind}:${row.subject_id}`,
        ip,
        outcome: 'denied',
        detail: { family: row.family_id },
      })
      note.reason = 'reuse_detected'
      throw new UnauthorizedError()
    }
    // Rotated: refused from now on through its row (rotated_at): at /auth/refresh by every instance at
    // once, at /tokens/verify by this one at once and by the others within a second (their remembered
    // answers); no entry in the revocation list (one per refresh filled every instance's memory).
    this.refreshGood.delete(claims.jti)
    const grant = await loadGrant(db, claims.role as Role, Number(claims.sub))
    // The row of the account decides its generation here (the family was ended with it anyway).
    if (!grant || accountGenerationOf(claims) < grant.account_gen) {
      await this.revokeFamily(row.family_id)
      throw new UnauthorizedError()
    }
    const mfa = row.mfa_verified_at === null ? {} : { mfa_verified_at: row.mfa_verified_at }
    return this.issuePair(grant, mfa, row.family_id)
  }

  /** Ends the session of a refresh token that belongs to the caller. */
  async logout(token: string, caller: Claims): Promise<void> {
    const claims = this.verifyJwt(token, ['refresh'])
    if (claims.sub !== caller.sub || claims.role !== caller.role) throw new UnauthorizedError()
    const row = await findRefresh(this.deps.db, claims.jti)
    if (!row || row.revoked_at !== null || row.rotated_at !== null) throw new UnauthorizedError()
    await this.revokeFamily(row.family_id)
    for (const listener of this.logoutListeners) await listener(caller)
  }

  /**
   * Puts a credential that is not a JWT (an API key: `api_key:<id>`) on the revocation list for
   * `forMs`, so every instance drops it from its cache at once.
   */
  async revokeCredential(jti: string, forMs: number): Promise<void> {
    await this.deps.revocations.revoke([{ jti, expiresAt: this.deps.clock.now() + forMs }])
  }

  /**
   * Ends the credential its holder presents (RFC 7009): a refresh token's whole family, an access or
   * offline token's `jti` (on the revocation list until its `exp`), another credential through the
   * revoker its feature registered. Answers the claims of what was ended, or null when there was
   * nothing to end: a forged, expired, unknown or already ended credential, whose holder learns
   * nothing from the answer. A store that cannot be written throws (the revocation is not lost quietly).
   */
  async revokePresented(token: string): Promise<Claims | null> {
    for (const [prefix, revoke] of this.revokers) if (token.startsWith(prefix)) return revoke(token)
    if (this.resolverFor(token)) return null
    const claims = this.deps.jwt.tryVerify(token)
    if (!claims) return null
    if (claims.type === 'refresh') {
      const row = await findRefresh(this.deps.db, claims.jti)
      if (!row || row.revoked_at !== null) return null
      await this.revokeFamily(row.family_id)
      return claims
    }
    if (await this.revokedNow(claims)) return null
    await this.deps.revocations.revoke([{ jti: claims.jti, expiresAt: claims.exp * 1000 }])
    return claims
  }

  /** Ends a refresh-token family: its rows are marked revoked, which refuses each of its tokens. */
  async revokeFamily(familyId: string): Promise<void> {
    await revokeFamily(this.deps.db, familyId, this.deps.clock.now())
    this.forgetRefreshChecks()
  }
}
