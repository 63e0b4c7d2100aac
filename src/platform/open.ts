import path from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import type { Clock } from './clock.js'
import type { Config } from './config.js'
import { type DatabaseHandle, type Db, openDatabase, servicePoolOptions } from './db/database.js'
import { createHttpClient, type HttpClient } from './http-client.js'
import { JobRunner } from './jobs/jobs.js'
import { MAIL_JOB, type MailTransport, mailJob, outboxTransport, smtpTransport } from './mail.js'
import { memoryCounters, redisCounters } from './rate-limit.js'
import { connectRedis, createRedis } from './redis.js'
import { type BudgetedSmsSender, budgetedSmsSender, createSmsSender, type SmsSender } from './sms.js'
import { databaseUnavailable } from './startup.js'

/** What the platform counts (the app's metrics registry fits it). */
export interface PlatformCounters {
  dbErrors: { inc(): void }
  redisErrors: { inc(): void }
  mailSends: { inc(labels: { outcome: 'sent' | 'failed' }): void }
  /** `refused`: over SMS_GLOBAL_RATE_LIMIT, never handed to the transport. */
  smsSends: { inc(labels: { outcome: 'sent' | 'failed' | 'refused' }): void }
}

export interface OpenOptions {
  config: Config
  clock: Clock
  log: FastifyBaseLogger
  counters: PlatformCounters
  /** Every failed database query, after counting (readiness hears of storage that takes no writes). */
  onDatabaseError: (err: unknown) => void
  /** Adds a resource to close when the app closes, in reverse order of opening. */
  closeLater: (close: () => unknown) => void
  /** Requests being answered now (the job runner's jobs that yield to requests wait for none). */
  requestsInFlight?: () => number
  /** Mail delivery; SMTP_URL or the outbox folder when absent. */
  mailTransport?: MailTransport | undefined
  /** Where SMS go; the configured provider when absent. */
  sms?: SmsSender | undefined
}

/** The shared mechanisms every feature is built on. */
export interface Platform {
  database: DatabaseHandle
  db: Db
  redis: Redis | undefined
  /** The job queue; features register their own kinds; it starts when the app is ready. */
  jobs: JobRunner
  /** Runs due jobs now (a committed notification goes out at once instead of at the next poll). */
  runDueJobs: () => void
  mail: MailTransport
  /** Under the fleet's budget, SMS_GLOBAL_RATE_LIMIT. */
  sms: BudgetedSmsSender
  /** The HTTP client for caller-chosen addresses (webhooks): refuses non-public ones unless allowed. */
  http: HttpClient
}

/**
 * Opens the platform: the database (migrations applied), Redis when configured, the job queue with the
 * mail job, mail and SMS transports (counted), the outbound HTTP client. A dependency that cannot be
 * reached fails here with one line naming it.
 */
export async function openPlatform(o: OpenOptions): Promise<Platform> {
  const { config, clock, log, counters } = o
  const database = await openDatabase(config.databaseUrl, {
    ...servicePoolOptions(config),
    onError: (err) => {
      counters.dbErrors.inc()
      o.onDatabaseError(err)
    },
  }).catch((err) => {
    throw databaseUnavailable(config.databaseUrl, err)
  })
  o.closeLater(() => database.close())
  const redis = config.redis ? createRedis(config.redis, log) : undefined
  if (redis) {
    redis.on('error', () => counters.redisErrors.inc())
    o.closeLater(() => redis.disconnect())
  }
  const { ahead } = await database.migrate().catch((err) => {
    throw databaseUnavailable(config.databaseUrl, err)
  })
  if (ahead.length > 0)
    log.warn(
      { migrations: ahead },
      'the database holds migrations of a newer release; running on beside them (each migration stays compatible with the release before it)',
    )
  if (redis) await connectRedis(redis)

  const smtp =
    !o.mailTransport && config.SMTP_URL && config.MAIL_TRANSPORT !== 'outbox'
      ? smtpTransport(config.SMTP_URL, config.MAIL_FROM, config.SMTP_TIMEOUT_SECONDS)
      : undefined
  // Closed after the jobs stopped (closers run in reverse): the jobs in flight finish their sends.
  if (smtp) o.closeLater(() => smtp.close())
  const jobs = new JobRunner({
    db: database.db,
    dialect: database.dialect,
    clock,
    log,
    pollMs: config.JOBS_POLL_MS,
    leaseMs: config.JOBS_LEASE_SECONDS * 1000,
    ...(o.requestsInFlight ? { requestsInFlight: o.requestsInFlight } : {}),
  })
  o.closeLater(() => jobs.stop())
  const mail = counted(
    o.mailTransport ??
      smtp ??
      outboxTransport(path.join(config.DATA_DIR, 'outbox', 'mail'), config.MAIL_FROM),
    counters.mailSends,
  )
  jobs.register(MAIL_JOB, mailJob(mail))
  let sms = o.sms
  if (!sms) {
    const configured = createSmsSender(config, clock)
    o.closeLater(() => configured.close())
    sms = configured
  }
  const http = createHttpClient({ allowPrivate: config.WEBHOOK_ALLOW_PRIVATE, timeoutMs: 10_000 })
  o.closeLater(() => http.close())
  return {
    database,
    db: database.db,
    redis,
    jobs,
    runDueJobs: () => {
      jobs.runDue().catch((err) => log.warn({ err: { message: (err as Error).message } }, 'job run failed'))
    },
    mail,
    // The fleet's budget first: a refused text is never handed to the transport.
    sms: budgetedSmsSender(counted(sms, counters.smsSends), {
      perMinute: config.SMS_GLOBAL_RATE_LIMIT,
      counters: redis ? redisCounters(redis, `${config.REDIS_PREFIX}sms-global|`) : memoryCounters(clock, 1),
      onRefused: () => counters.smsSends.inc({ outcome: 'refused' }),
    }),
    http,
  }
}

/** A transport whose sends are counted by outcome. */
function counted<M, T extends { send(message: M): Promise<void> }>(
  transport: T,
  counter: PlatformCounters['mailSends'],
): T {
  return {
    ...transport,
    async send(message: M) {
      try {
        await transport.send(message)
      } catch (err) {
        counter.inc({ outcome: 'failed' })
        throw err
      }
      counter.inc({ outcome: 'sent' })
    },
  }
}
