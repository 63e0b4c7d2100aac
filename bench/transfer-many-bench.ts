/**
 * 10,000 transfers through the partner client's `transferMany`, on SQLite and on
 * PostgreSQL (BENCH_DATABASE_URL, skipped when unreachable): the on-sale case, a partner sending a
 * whole allocation at once. Standalone: `node --import tsx bench/transfer-many-bench.ts`; `npm run
 * bench` runs it and prints its rows. BENCH_TRANSFERS changes the count (default 10000).
 *
 * The service runs in a child process (bench/partner-bench.ts --serve, PARTNER_RATE_LIMIT at its
 * default); this process is the partner: one API key, 2,000 holders (transfers group onto shared
 * links, as in a real sale), chunks of 500, two requests in flight.
 *
 * BENCH_TRANSFER_EMAILS=1: each database is measured twice in the same run, without e-mails and then
 * with the grouped holder e-mails (a QR image per ticket) going out at once
 * (TRANSFER_EMAIL_DELAY_SECONDS=0) to an SMTP relay in this process while the transfers arrive, the
 * worst case for the service. The relay reads the ticket codes out of each e-mail: the row adds how many
 * e-mails arrived, how many tickets they carried and how many distinct ones (every transfer mailed
 * exactly once: both equal the transfers made), and when the last e-mail arrived.
 */
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import { SMTPServer } from 'smtp-server'
import { createPartnerClient, unwrap } from '../packages/partner-client/src/index.js'
import { transferMany } from '../packages/partner-client/src/transfer-many.js'
import { startTarget } from './partner-bench.js'

export interface TransferManyRow {
  database: 'sqlite' | 'postgres'
  /** Whether the holder e-mails went out during the run. */
  emails: boolean
  transfers: number
  seconds: number
  per_second: number
  made: number
  /**
   * With the e-mails: e-mails received, ticket codes they carried (and distinct ones), and seconds from
   * the first transfer to the last e-mail.
   */
  mails?: { received: number; tickets: number; distinct_tickets: number; last_at_seconds: number }
  /** Why the row is missing (PostgreSQL unreachable). */
  skipped?: string
}

const COUNT = Number(process.env.BENCH_TRANSFERS ?? 10_000)
const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const EMAILS = process.env.BENCH_TRANSFER_EMAILS === '1'

/** The ticket codes in an e-mail's text part (quoted-printable: soft line breaks joined first). */
const CODE_LINE = /ticket code \(the QR code at the gate\): ([A-Za-z0-9_.-]+)/g

/** An SMTP relay that takes every message and counts it and its ticket codes, noting when the last one arrived. */
async function startRelay() {
  const relay = { received: 0, tickets: 0, codes: new Set<string>(), lastAt: 0 }
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    // The service's pooled connections send many messages each, and may idle between bursts.
    socketTimeout: 120_000,
    onData(stream, _session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (c: Buffer) => chunks.push(c))
      stream.on('end', () => {
        relay.received++
        for (const [, code] of Buffer.concat(chunks)
          .toString('latin1')
          .replace(/=\r?\n/g, '')
          .matchAll(CODE_LINE)) {
          relay.tickets++
          relay.codes.add(code!)
        }
        relay.lastAt = performance.now()
        callback()
      })
    },
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    relay,
    url: `smtp://127.0.0.1:${(server.server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/**
 * Waits until every transfer made was mailed, or no e-mail arrived for 30 s (longer than the first
 * retry of a failed send, 10 s), so a stalled queue shows as a shortfall rather than a hang.
 */
async function settled(relay: { received: number; tickets: number }, made: number): Promise<void> {
  let seen = -1
  let quietSince = performance.now()
  while (relay.tickets < made && performance.now() - quietSince < 30_000) {
    await sleep(200)
    if (relay.received !== seen) {
      seen = relay.received
      quietSince = performance.now()
    }
  }
}

async function runOne(database: 'sqlite' | 'postgres', emails: boolean): Promise<TransferManyRow> {
  const schema = `wbbench_${randomBytes(5).toString('hex')}`
  const env: Record<string, string> =
    database === 'postgres' ? { BENCH_DATABASE_URL: DATABASE_URL, BENCH_DATABASE_SCHEMA: schema } : {}
  if (database === 'sqlite') delete process.env.BENCH_DATABASE_URL
  const smtp = emails ? await startRelay() : undefined
  if (smtp) env.BENCH_SMTP_URL = smtp.url
  const { target, stop } = await startTarget(env)
  try {
    const client = createPartnerClient({ baseUrl: target.baseUrl, apiKey: target.apiKey })
    const type = await unwrap(
      client.POST('/companies/ticket', {
        body: {
          event_uid: 'bench-fest',
          name: 'Day pass',
          price: 59.9,
          ticket_date: '2026-07-18T12:00:00.000',
        },
      }),
    )
    const transfers = Array.from({ length: COUNT }, (_, i) => ({
      email: `holder${i % 2000}@example.com`,
      ticket_uid: type.ticket_uid,
      company_ticket_id: `sale-${i}`,
      balance: 12.5,
    }))
    const started = performance.now()
    const results = await transferMany(client, 'bench-fest', transfers)
    const seconds = (performance.now() - started) / 1000
    const made = results.filter((r) => r.status === 201).length
    if (smtp) await settled(smtp.relay, made)
    return {
      database,
      emails,
      transfers: COUNT,
      seconds: Math.round(seconds * 100) / 100,
      per_second: Math.round(COUNT / seconds),
      made,
      ...(smtp
        ? {
            mails: {
              received: smtp.relay.received,
              tickets: smtp.relay.tickets,
              distinct_tickets: smtp.relay.codes.size,
              last_at_seconds: Math.round((smtp.relay.lastAt - started) / 10) / 100,
            },
          }
        : {}),
    }
  } finally {
    await stop()
    await smtp?.close()
    if (database === 'postgres') {
      const c = new pg.Client({ connectionString: DATABASE_URL })
      await c.connect()
      await c.query(`drop schema if exists ${schema} cascade`)
      await c.end()
    }
  }
}

async function postgresReachable(): Promise<boolean> {
  const c = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 2000 })
  try {
    await c.connect()
    await c.end()
    return true
  } catch {
    return false
  }
}

export async function runTransferManyBench(): Promise<TransferManyRow[]> {
  const modes = EMAILS ? [false, true] : [false]
  const rows: TransferManyRow[] = []
  for (const emails of modes) rows.push(await runOne('sqlite', emails))
  const reachable = await postgresReachable()
  for (const emails of modes)
    rows.push(
      reachable
        ? await runOne('postgres', emails)
        : {
            database: 'postgres',
            emails,
            transfers: COUNT,
            seconds: 0,
            per_second: 0,
            made: 0,
            skipped: 'PostgreSQL unreachable',
          },
    )
  return rows
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = await runTransferManyBench()
  for (const r of rows)
    console.log(
      r.skipped
        ? `${r.database.padEnd(9)} skipped: ${r.skipped}`
        : `${r.database.padEnd(9)} ${r.emails ? 'e-mails ' : 'no mail '} ${r.transfers} transfers in ${r.seconds} s (${r.per_second}/s), ${r.made} made${r.mails ? `; ${r.mails.received} e-mails carrying ${r.mails.tickets} tickets (${r.mails.distinct_tickets} distinct), the last ${r.mails.last_at_seconds} s after the first transfer` : ''}`,
    )
  console.log(JSON.stringify(rows))
}
