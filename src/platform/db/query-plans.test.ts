// The queries that must stay flat as tables grow to millions of rows use an index on PostgreSQL: each
// is run through its store function, its SQL caught from the query log, and EXPLAINed with sequential
// scans priced out (`enable_seqscan = off`, so the planner takes an index whenever one fits: a table this
// small would otherwise be read whole, which says nothing). A query that no index serves still shows a
// Seq Scan; one served by another index than meant (a walk of the primary key, filtering on the way)
// does not name the index it should. No timing is measured: the plan is the property.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import { eachBackend, httpBackends, useDatabase } from '../../../test/helpers/backends.js'
import { listAuditAfter, pageAuditEntries, pruneAudit } from '../../audit/audit.store.js'
import { pruneSetupCodes } from '../../devices/setup-codes.store.js'
import { pruneClaimedLinkTokens } from '../../holder/holder.store.js'
import { pruneExpiredRefresh } from '../../tokens/refresh.store.js'
import {
  liveRevocationLines,
  liveRevocationsPage,
  pruneExpiredRevocations,
} from '../../tokens/revocations.store.js'
import { ticketColumnsAfter } from '../../transfers/transfers.store.js'
import { pruneDeliveries } from '../../webhooks/webhooks.service.js'
import { listDeliveries } from '../../webhooks/webhooks.store.js'
import { pruneFinishedJobs } from '../jobs/jobs.js'
import type { Db } from './database.js'
import type { Database } from './schema.js'

/** The tables that grow with use: none of them may be read whole by the queries below. */
const BIG =
  /Seq Scan on (audit_log|webhook_deliveries|webhook_attempts|holder_link_tokens|holder_links|jobs|revoked_tokens|refresh_tokens|device_setup_codes)\b/

/**
 * Retention's batches, each in its (time, key) order: a walk of `index` in that order (no Sort, with
 * sorts and bitmaps priced out: else the empty table's estimates favour them); a batch past a cursor
 * starts at it (the row comparison is an index condition, not a filter on a walk from the start).
 */
const inOrder = ['enable_sort', 'enable_bitmapscan']
const walk = (index: string) => new RegExp(`^(?![\\s\\S]*Sort)[\\s\\S]*Index (Only )?Scan using ${index} on `)
const walkPast = (index: string, time: string) =>
  new RegExp(
    `^(?![\\s\\S]*Sort)[\\s\\S]*Index (Only )?Scan using ${index} on [^\\n]*\\n\\s*Index Cond: [^\\n]*ROW\\(${time}, `,
  )

/**
 * Each query, run through its store function, the index its plan must name, and the planner settings
 * turned off for it besides sequential scans.
 */
const QUERIES: [string, (db: Db) => Promise<unknown>, RegExp, string[]?][] = [
  ['audit page by kind', (db) => pageAuditEntries(db, { kind: 'login', limit: 51 }), /audit_log_kind_id/],
  [
    'audit page by kind, older than a cursor',
    (db) => pageAuditEntries(db, { kind: 'login', before: 1_000_000, limit: 51 }),
    /audit_log_kind_id/,
  ],
  [
    'audit page by actor',
    (db) => pageAuditEntries(db, { actor: 'admin:1', limit: 51 }),
    /audit_log_actor_id/,
  ],
  [
    'audit page by outcome',
    (db) => pageAuditEntries(db, { outcome: 'failure', limit: 51 }),
    /audit_log_outcome_id/,
  ],
  [
    'audit forward page after a cursor (export, sink)',
    (db) => listAuditAfter(db, 'postgres', { after: { tx: 1000, id: 5000 }, limit: 200 }),
    /audit_log_tx_id/,
  ],
  [
    "a partner's deliveries by status",
    (db) => listDeliveries(db, 1, { limit: 50, status: 'failed' }),
    /webhook_deliveries_partner_status/,
  ],
  ["a partner's deliveries", (db) => listDeliveries(db, 1, { limit: 50 }), /webhook_deliveries_partner/],
  [
    // Start-up's load: a walk of the covering index in its order, never the table's rows.
    // With sorts and bitmaps priced out too (the empty table's estimates favour them), a plan without a
    // Sort is one whose order the index gives.
    'a page of the live revocations',
    (db) => liveRevocationsPage(db, { expiresAt: 1, jti: 'a' }, 10_000),
    /^(?![\s\S]*Sort)[\s\S]*Index Only Scan using revoked_tokens_live/,
    ['enable_sort', 'enable_bitmapscan'],
  ],
  [
    // The load at start reads the same page as lines (one string a page).
    'a page of the live revocations, as lines',
    (db) => liveRevocationLines(db, { expiresAt: 1, jti: 'a' }, 10_000),
    /^(?![\s\S]*Sort)[\s\S]*Index Only Scan using revoked_tokens_live/,
    ['enable_sort', 'enable_bitmapscan'],
  ],
  [
    // A page of a first-sync snapshot, gathered by the database: a walk of the event's tickets in id
    // order from the cursor on, never a sort of the event.
    'a page of a first-sync snapshot',
    (db) => ticketColumnsAfter(db, 1, 1000, 5000, { chars: 22, missing: '~'.repeat(22) }),
    /^(?![\s\S]*Sort)[\s\S]*Index Scan using transfers_event_id/,
    ['enable_sort', 'enable_bitmapscan'],
  ],
  // Retention: a drain's first batch, and a batch past the cursor where the last one stopped.
  [
    'retention: revocations',
    (db) => pruneExpiredRevocations(db, 1, 500),
    walk('revoked_tokens_live'),
    inOrder,
  ],
  [
    'retention: revocations, past a cursor',
    (db) => pruneExpiredRevocations(db, 1, 500, [0, 'a']),
    walkPast('revoked_tokens_live', 'expires_at'),
    inOrder,
  ],
  [
    'retention: refresh tokens',
    (db) => pruneExpiredRefresh(db, 1, 500),
    walk('refresh_tokens_expires_jti'),
    inOrder,
  ],
  [
    'retention: refresh tokens, past a cursor',
    (db) => pruneExpiredRefresh(db, 1, 500, [0, 'a']),
    walkPast('refresh_tokens_expires_jti', 'expires_at'),
    inOrder,
  ],
  [
    'retention: deliveries',
    (db) => pruneDeliveries(db, 1, 500),
    walk('webhook_deliveries_created_id'),
    inOrder,
  ],
  [
    'retention: deliveries, past a cursor',
    (db) => pruneDeliveries(db, 1, 500, [0, 1]),
    walkPast('webhook_deliveries_created_id', 'created_at'),
    inOrder,
  ],
  [
    'retention: claim-link tokens',
    (db) => pruneClaimedLinkTokens(db, 1, 500),
    walk('holder_link_tokens_claimed_hash'),
    inOrder,
  ],
  [
    'retention: claim-link tokens, past a cursor',
    (db) => pruneClaimedLinkTokens(db, 1, 500, [0, 'a']),
    walkPast('holder_link_tokens_claimed_hash', 'claimed_at'),
    inOrder,
  ],
  ['retention: audit', (db) => pruneAudit(db, 1, 500), walk('audit_log_at_id'), inOrder],
  [
    'retention: audit, past a cursor',
    (db) => pruneAudit(db, 1, 500, [0, 1]),
    walkPast('audit_log_at_id', 'at'),
    inOrder,
  ],
  [
    'retention: device set-up codes',
    (db) => pruneSetupCodes(db, 1, 500),
    walk('device_setup_codes_expires_id'),
    inOrder,
  ],
  [
    'retention: device set-up codes, past a cursor',
    (db) => pruneSetupCodes(db, 1, 500, [0, 1]),
    walkPast('device_setup_codes_expires_id', 'expires_at'),
    inOrder,
  ],
  // The jobs' cursor is a range and a time: the batch starts at that time (no key to compare).
  ['retention: jobs', (db) => pruneFinishedJobs(db, 1, 500), walk('jobs_due'), inOrder],
  [
    'retention: jobs, past a cursor',
    (db) => pruneFinishedJobs(db, 1, 500, [0, 'done']),
    walk('jobs_due'),
    inOrder,
  ],
  [
    'retention: failed jobs, past a cursor',
    (db) => pruneFinishedJobs(db, 1, 500, [0, 'failed']),
    walk('jobs_due'),
    inOrder,
  ],
]

eachBackend(
  httpBackends.filter((b) => b.name.startsWith('postgres')),
  'query plans of the filters and retention',
  (backend) => {
    const database = useDatabase(backend)

    test('each query uses its index and reads no growing table whole', async () => {
      const env = database.env()
      const schema = env.DATABASE_SCHEMA!
      const pool = new pg.Pool({ connectionString: env.DATABASE_URL, options: `-c search_path=${schema}` })
      const caught: { sql: string; parameters: readonly unknown[] }[] = []
      const spy: Db = new Kysely<Database>({
        dialect: new PostgresDialect({ pool }),
        log: (event) => {
          // The statements, not a transaction's begin and commit.
          if (event.level === 'query' && /^\s*(select|update|delete|insert|with)\b/i.test(event.query.sql))
            caught.push(event.query)
        },
      })
      const client = await pool.connect()
      try {
        await client.query('set enable_seqscan = off')
        for (const [name, run, index, off = []] of QUERIES) {
          for (const setting of off) await client.query(`set ${setting} = off`)
          caught.length = 0
          await run(spy)
          assert.ok(caught.length > 0, `${name}: no query ran`)
          const plans: string[] = []
          for (const q of caught) {
            const plan = await client.query(`explain ${q.sql}`, q.parameters as unknown[])
            plans.push(plan.rows.map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN']).join('\n'))
          }
          const all = plans.join('\n---\n')
          assert.doesNotMatch(all, BIG, `${name} reads a growing table whole:\n${all}`)
          assert.match(all, index, `${name} does not use ${index}:\n${all}`)
          for (const setting of off) await client.query(`reset ${setting}`)
        }
      } finally {
        client.release()
        await spy.destroy()
      }
    })
  },
)
