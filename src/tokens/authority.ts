import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import type { AuditLog } from '../audit/audit.store.js'
import { type EdgeKeys, jwtEdgeOptions } from '../edge/edge-keys.js'
import type { Metrics } from '../metrics/metrics.js'
import type { Clock } from '../platform/clock.js'
import type { Config } from '../platform/config.js'
import type { Db } from '../platform/db/database.js'
import { JwtCodec } from './jwt.js'
import { memoryRevocations, type Revocation, type RevocationStore, redisRevocations } from './revocations.js'
import { TokenService } from './token.service.js'

export interface TokenAuthorityDeps {
  db: Db
  clock: Clock
  log: FastifyBaseLogger
  /** Redis when configured: a revocation reaches every instance at once instead of at the next poll. */
  redis: Redis | undefined
  config: Pick<Config, 'REDIS_PREFIX' | 'REVOCATION_POLL_MS'>
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
   * For a serving app: builds the codec and the token service, and loads the live revocations and
   * follows the feed until `stop`. The command line never calls it (it signs nothing and lives briefly).
   */
  serve(signing: SigningDeps): Promise<TokenService>
  stop(): void
}

export function createTokenAuthority(deps: TokenAuthorityDeps): TokenAuthority {
  const { db, clock, log, redis, config } = deps
  const revocationDeps = { db, clock, pollMs: config.REVOCATION_POLL_MS, log }
  const revocations = redis
    ? redisRevocations(revocationDeps, redis, config.REDIS_PREFIX, log)
    : memoryRevocations(revocationDeps)
  return {
    revocations,
    revoke: (entries) => revocations.revoke(entries),
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
      return new TokenService({ db, jwt, revocations, clock, audit, config: tokenConfig, metrics })
    },
    stop: () => revocations.stop(),
  }
}
