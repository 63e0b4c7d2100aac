import os from 'node:os'
import pino from 'pino'
import { recordInTransaction } from '../audit/audit.service.js'
import { type Clock, systemClock } from '../platform/clock.js'
import type { Config } from '../platform/config.js'
import { type DatabaseHandle, type Db, openDatabase } from '../platform/db/database.js'
import { connectRedis, createRedis } from '../platform/redis.js'
import { databaseUnavailable } from '../platform/startup.js'
import { SESSION_STORES } from '../token-extensions.js'
import { createTokenAuthority, type TokenAuthority } from '../tokens/authority.js'
import { CliError } from './command.js'

// Apart from command.ts (parsing and dispatch): what a command works on loads the token authority and
// the audit log, which `serve` and `--help` have no use for.

/** What a break-glass command works with: the configured database, a clock and the token authority. */
export interface CliContext {
  db: Db
  database: DatabaseHandle
  config: Config
  clock: Clock
  /** The service's own token authority: a revocation here reaches the running instances. */
  authority: TokenAuthority
}

export async function withContext<T>(config: Config, fn: (ctx: CliContext) => Promise<T>): Promise<T> {
  let database: DatabaseHandle | undefined
  try {
    database = await openDatabase(config.databaseUrl, { schema: config.DATABASE_SCHEMA })
    await database.migrate()
  } catch (err) {
    await database?.close().catch(() => undefined)
    const refusal = databaseUnavailable(config.databaseUrl, err)
    // The refusal's own exit status (docs/operations.md, "Refusals at start"), as `serve` exits with.
    throw new CliError(`wristband: ${refusal.message}`, refusal.exitStatus)
  }
  // The service's line format (level names, ISO times), on standard error.
  const log = pino(
    {
      level: 'warn',
      formatters: { level: (label) => ({ level: label }) },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.destination(2),
  )
  const redis = config.redis ? createRedis(config.redis, log) : undefined
  try {
    if (redis) await connectRedis(redis)
    // Built as the app builds it (src/app.ts): the sessions of SESSION_STORES end with an account's tokens.
    const authority = createTokenAuthority({
      db: database.db,
      clock: systemClock,
      log,
      redis,
      config,
      sessionStores: SESSION_STORES,
    })
    return await fn({ db: database.db, database, config, clock: systemClock, authority })
  } finally {
    redis?.disconnect()
    await database.close()
  }
}

function osUser(): string | null {
  try {
    return os.userInfo().username
  } catch {
    return null
  }
}

/**
 * Does one break-glass action and its audit record in one transaction, so no change goes unrecorded.
 * A refused action (a CliError: unknown account, duplicate e-mail) is recorded as a failure.
 * `work` returns the record's detail; it never holds a secret.
 */
export async function audited<T extends { detail: Record<string, unknown> }>(
  ctx: CliContext,
  kind: string,
  work: (tx: Db) => Promise<T>,
): Promise<T> {
  const base = { kind, actor: 'cli', ip: null }
  const who = { os_user: osUser(), host: os.hostname() }
  try {
    return await ctx.db.transaction().execute(async (tx) => {
      const result = await work(tx)
      await recordInTransaction(tx, ctx.clock.now(), {
        ...base,
        outcome: 'success',
        detail: { ...result.detail, ...who },
      })
      return result
    })
  } catch (err) {
    if (err instanceof CliError)
      await recordInTransaction(ctx.db, ctx.clock.now(), {
        ...base,
        outcome: 'failure',
        detail: { error: err.message, ...who },
      })
    throw err
  }
}
