import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import type { AuditLog } from '../audit/audit.store.js'
import { type EdgeKeys, jwtEdgeOptions } from '../edge/edge-keys.js'
import type { Role } from '../identities/grants.js'
import { nextAccountGeneration } from '../identities/identities.store.js'
import type { Metrics } from '../metrics/metrics.js'
import type { Clock } from '../platform/clock.js'
import { type Config, MAX_OFFLINE_TOKEN_HOURS } from '../platform/config.js'
import type { Db } from '../platform/db/database.js'
import { accountTokensJti } from './claims.js'
import { JwtCodec } from './jwt.js'
import { revokeSubject } from './refresh.store.js'
import { memoryRevocations, type Revocation, type RevocationStore, redisRevocations } from './revocations.js'
import { insertRevocations } from './revocations.store.js'
import { TokenService } from './token.service.js'

export interface TokenAuthorityDeps {
  db: Db
  clock: Clock
  log: FastifyBaseLogger
  /** Redis when configured: a revocation reaches every instance at once instead of at the next poll. */
  redis: Redis | undefined
  config: Pick<Config, 'REDIS_PREFIX' | 'REVOCATION_POLL_MS' | 'databaseUrl' | 'DATABASE_SCHEMA' | 'DATA_DIR'>
  /**
   * The sessions other features keep for an account (the dashboard's), ended with its tokens by
   * `endSessions`; each deletes them in the given transaction and says how many it ended. Given by the
   * app and the command line alike, so no way of ending sessions forgets one kind.
   */
  sessionStores: readonly SessionStore[]
  /** Awaited before each page of the revocations' load at start (RevocationDeps.loadPace). */
  revocationLoadPace?: () => Promise<void>
}

/** Whose sessions: a token role, or a kind of account that has only dashboard sessions. */
export type SessionKind = Role | 'dashboard_user'

export type SessionStore = (tx: Db, kind: SessionKind, id: number) => Promise<number>

/** The one way to end an account's sessions (see TokenAuthority.endSessions). */
export type EndSessions = (tx: Db, kind: SessionKind, id: number) => Promise<EndedSessions>

/** What `endSessions` ended. */
export interface EndedSessions {
  /** How many refresh-token families' tokens and dashboard sessions ended. */
  sessions: number
  /**
   * Tells every running instance at once that the account's token generation ended (the Redis feed);
   * call it after the transaction commits. Without it they learn it from the database within
   * REVOCATION_POLL_MS. Does nothing for an account that has no tokens (a dashboard user).
   */
  publish(): Promise<void>
}

/** What signing tokens needs besides the authority's own deps: a serving app has it, the command line not. */
export interface SigningDeps {
  /** The signing secret first, then the previous ones that still verify. */
  secrets: readonly string[]
  edgeKeys: EdgeKeys
  audit: AuditLog
  metrics: Metrics
  config: Pick<
    Config,
    | 'JWT_AUDIENCE'
    | 'JWT_ISSUER'
    | 'OFFLINE_TOKEN_ALG'
    | 'ACCESS_TOKEN_EXPIRE_MINUTES'
    | 'REFRESH_TOKEN_EXPIRE_DAYS'
    | 'OFFLINE_TOKEN_EXPIRE_HOURS'
  >
}

/**
 * Who issues and revokes tokens, built the same way for the service and the command line: the
 * revocation list every process on the database writes and reads and, for a serving app, the JWT
 * codec and the token service (which keeps the refresh-token families) over it.
 */
export interface TokenAuthority {
  /** The jti blocklist (the database, and Redis when configured). */
  readonly revocations: RevocationStore
  /** Puts credentials on the revocation list; running instances refuse them from then on. */
  revoke(entries: Revocation[]): Promise<void>
  /**
   * Ends every session and token of an account inside the caller's transaction `tx`: its refresh-token
   * families and the sessions of `sessionStores`, refused through their rows from the moment `tx`
   * commits, and, for an account tokens are minted for, its token generation: the next one starts and
   * the revocation of the one that ended is written in `tx`, so every access, refresh and offline token
   * minted before (bound to a device or not) is refused by every instance within REVOCATION_POLL_MS of
   * the commit, at once where the caller publishes it (`publish()` after the commit). The entry outlives
   * every access and offline token (MAX_OFFLINE_TOKEN_HOURS); a refresh token is refused by its row.
   */
  endSessions(tx: Db, kind: SessionKind, id: number): Promise<EndedSessions>
  /**
   * For a serving app: builds the codec and the token service, and loads the live revocations and
   * follows the feed until `stop`. The command line never calls it (it signs nothing and lives briefly).
   */
  serve(signing: SigningDeps): Promise<TokenService>
  stop(): void
}

export function createTokenAuthority(deps: TokenAuthorityDeps): TokenAuthority {
  const { db, clock, log, redis, config, sessionStores, revocationLoadPace } = deps
  // The serving app's token service (none on the command line): endSessions makes it forget at once.
  let service: TokenService | undefined
  const revocationDeps = {
    db,
    clock,
    pollMs: config.REVOCATION_POLL_MS,
    log,
    // Tests hold the load with a pace (in this process); an in-memory database has no second connection.
    ...(revocationLoadPace
      ? { loadPace: revocationLoadPace }
      : config.databaseUrl === 'sqlite::memory:'
        ? {}
        : { database: { url: config.databaseUrl, schema: config.DATABASE_SCHEMA, dir: config.DATA_DIR } }),
  }
  const revocations = redis
    ? redisRevocations(revocationDeps, redis, config.REDIS_PREFIX, log)
    : memoryRevocations(revocationDeps)
  return {
    revocations,
    revoke: (entries) => revocations.revoke(entries),
    async endSessions(tx, kind, id) {
      const now = clock.now()
      let sessions = await revokeSubject(tx, kind, id, now)
      for (const end of sessionStores) sessions += await end(tx, kind, id)
      service?.forgetRefreshChecks()
      const ended = kind === 'dashboard_user' ? undefined : await nextAccountGeneration(tx, kind, id)
      if (ended === undefined) return { sessions, publish: async () => {} }
      const entry = {
        jti: accountTokensJti(kind, id, ended),
        expiresAt: now + MAX_OFFLINE_TOKEN_HOURS * 3_600_000,
      }
      await insertRevocations(tx, now, [entry])
      return { sessions, publish: () => revocations.revoke([entry]) }
    },
    async serve({ secrets, edgeKeys, audit, metrics, config: tokenConfig }) {
      const jwt = new JwtCodec({
        secret: secrets[0]!,
        previousSecrets: secrets.slice(1),
        audience: tokenConfig.JWT_AUDIENCE,
        issuer: tokenConfig.JWT_ISSUER,
        clock,
        edge: jwtEdgeOptions(edgeKeys, tokenConfig.OFFLINE_TOKEN_ALG === 'EdDSA'),
      })
      await revocations.start()
      service = new TokenService({
        db,
        jwt,
        revocations,
        clock,
        audit,
        config: { ...tokenConfig, REVOCATION_POLL_MS: config.REVOCATION_POLL_MS },
        metrics,
      })
      return service
    },
    stop: () => revocations.stop(),
  }
}
