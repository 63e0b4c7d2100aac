import { type Kysely, sql } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Data at festival scale. Only additions, so the previous release keeps running beside this
 * one; the counters are kept by triggers, so its writes are counted too.
 *
 * - Ticket counters, kept by the database in the transaction of every write of `transfers` (transfer,
 *   claim, use, use-batch, re-issue, and any write a future path or the previous release makes):
 *   - `ticket_counts` (ticket type, measure): `issued`, `claimed`, `used`, and the sums `balance` and
 *     `promo_balance` (minor units). Each kind of write changes rows of its own measures, so a transfer
 *     (which holds its event's row from nextFeedSeq) and a use (which takes that row last) never wait
 *     for each other's counter rows in opposite orders.
 *   - `gate_use_counts` (event, gate): uses by the gate the scan named, else the gate on the ticket;
 *     `gate` is `-` for none and `+name` for a gate, so that no gate and an empty name stay apart.
 *   - `use_slot_counts` (event, 5-minute slot of `used_at`): uses over time. Every zone offset in use is
 *     a multiple of 15 minutes, so the chart's buckets (5 minutes to a day, on the event's wall clock)
 *     are made of whole slots.
 *   - `delivery_counts` (event, status, tried): webhook deliveries, for the dashboard and the pending
 *     count of /metrics.
 *   On PostgreSQL the triggers are per statement and add up a statement's rows first, then take the
 *   counter rows in key order (a claim moves many tickets at once); on SQLite (one writer) per row.
 * - Indexes for what still reads `transfers` and deliveries by event: (event_id, ticket_type_id), the
 *   uses of an event by time, deliveries by (event_id, status), the pending deliveries, and the failed
 *   attempts newest first (the dashboard's last error).
 * - Indexes for retention (platform/retention): refresh tokens by expiry, audit rows, deliveries and
 *   holder link tokens by age.
 * - Rotated refresh tokens are refused through their row (tokens/token.service.ts) from this release on:
 *   their revocation entries are dropped, which is what kept a 30-day entry per refresh in every
 *   instance's memory. A family ended by logout, reuse or endSessions is refused through its rows too.
 */
export const SLOT_MS = 300_000

interface Counter {
  table: string
  /** The counter's key columns (its primary key), then `event_id` when it is not a key, then `n`. */
  columns: readonly string[]
  key: string
  /** The counter's rows from a set of source rows `rows` (with `sign`: 1 added, -1 removed), in key order. */
  select(rows: string): string
}

/** What a set of transfers adds to each ticket counter (PostgreSQL takes the rows' locks in key order). */
const TICKET_COUNTERS: Counter[] = [
  {
    table: 'ticket_counts',
    columns: ['ticket_type_id', 'measure', 'event_id', 'n'],
    key: '(ticket_type_id, measure)',
    select(rows) {
      const measure = (name: string, value: string, where = 'true') =>
        `select ticket_type_id, event_id, '${name}' as measure, ${value} as d from ${rows} r where ${where}`
      return `select ticket_type_id, measure, min(event_id) as event_id, sum(d) as n from (
          ${measure('issued', 'sign')}
          union all ${measure('balance', 'balance * sign')}
          union all ${measure('promo_balance', 'promo_balance * sign')}
          union all ${measure('claimed', 'sign', 'claimed_at is not null')}
          union all ${measure('used', 'sign', 'used_at is not null')}
        ) x
        group by ticket_type_id, measure having sum(d) <> 0
        order by ticket_type_id, measure`
    },
  },
  {
    table: 'gate_use_counts',
    columns: ['event_id', 'gate', 'n'],
    key: '(event_id, gate)',
    select: (rows) => `select event_id, gate, sum(sign) as n from (
        select event_id, case when coalesce(used_gate, access_gate) is null then '-'
          else '+' || coalesce(used_gate, access_gate) end as gate, sign
        from ${rows} r where used_at is not null
      ) x
      group by event_id, gate having sum(sign) <> 0
      order by event_id, gate`,
  },
  {
    table: 'use_slot_counts',
    columns: ['event_id', 'slot', 'n'],
    key: '(event_id, slot)',
    select: (rows) => `select event_id, used_at / ${SLOT_MS} as slot, sum(sign) as n
      from ${rows} r where used_at is not null
      group by event_id, used_at / ${SLOT_MS} having sum(sign) <> 0
      order by event_id, slot`,
  },
]

/** Deliveries by event, status and whether they were tried (the dashboard's figures, /metrics' pending). */
const DELIVERY_COUNTERS: Counter[] = [
  {
    table: 'delivery_counts',
    columns: ['event_id', 'status', 'tried', 'n'],
    key: '(event_id, status, tried)',
    select: (rows) => `select event_id, status, tried, sum(sign) as n from (
        select event_id, status, case when attempts = 0 then 0 else 1 end as tried, sign from ${rows} r
      ) x
      group by event_id, status, tried having sum(sign) <> 0
      order by event_id, status, tried`,
  },
]

function upsert(counter: Counter, rows: string) {
  // No alias for the target: SQLite's ALTER TABLE … RENAME re-reads every trigger and refuses one there.
  return `insert into ${counter.table} (${counter.columns.join(', ')}) ${counter.select(rows)}
    on conflict ${counter.key} do update set n = ${counter.table}.n + excluded.n;`
}

/** Per statement, with the statement's old and new rows as transition tables. */
async function postgresTriggers(db: Kysely<unknown>, source: string, counters: Counter[]) {
  const ops = {
    insert: ['(select *, 1 as sign from new_rows)', 'new table as new_rows'],
    update: [
      '(select *, 1 as sign from new_rows union all select *, -1 as sign from old_rows)',
      'old table as old_rows new table as new_rows',
    ],
    delete: ['(select *, -1 as sign from old_rows)', 'old table as old_rows'],
  } as const
  for (const [op, [rows, referencing]] of Object.entries(ops)) {
    const name = `${source}_count_${op}`
    await sql
      .raw(
        `create function ${name}() returns trigger language plpgsql as $$
        begin
          ${counters.map((c) => upsert(c, rows)).join('\n')}
          return null;
        end $$`,
      )
      .execute(db)
    await sql
      .raw(
        `create trigger ${name} after ${op} on ${source} referencing ${referencing}
         for each statement execute function ${name}()`,
      )
      .execute(db)
  }
}

/** Per row: SQLite has no transition tables, a row's old and new values are one-row selects. */
async function sqliteTriggers(db: Kysely<unknown>, source: string, columns: string[], counters: Counter[]) {
  const rows = (which: ('new' | 'old')[]) =>
    `(${which
      .map(
        (w) =>
          `select ${columns.map((c) => `${w}.${c} as ${c}`).join(', ')}, ${w === 'new' ? 1 : -1} as sign`,
      )
      .join(' union all ')})`
  const ops = {
    insert: rows(['new']),
    // Only the columns counted: a transfer's feed position, mail and code updates fire nothing.
    [`update of ${columns.join(', ')}`]: rows(['new', 'old']),
    delete: rows(['old']),
  }
  for (const [op, source_rows] of Object.entries(ops))
    await sql
      .raw(
        `create trigger ${source}_count_${op.split(' ')[0]} after ${op} on ${source} begin
          ${counters.map((c) => upsert(c, source_rows)).join('\n')}
        end`,
      )
      .execute(db)
}

async function counted(
  db: Kysely<unknown>,
  dialect: MigrationContext['dialect'],
  source: string,
  columns: string[],
  counters: Counter[],
) {
  // Triggers first: on PostgreSQL creating them locks out writes of the table until this migration
  // commits, so the counts of the existing rows below and the triggers' later changes meet exactly.
  if (dialect === 'postgres') await postgresTriggers(db, source, counters)
  else await sqliteTriggers(db, source, columns, counters)
  for (const c of counters)
    await sql
      .raw(
        `insert into ${c.table} (${c.columns.join(', ')}) ${c.select(`(select *, 1 as sign from ${source})`)}`,
      )
      .execute(db)
}

export async function up(db: Kysely<unknown>, { dialect }: MigrationContext): Promise<void> {
  await db.schema
    .createTable('ticket_counts')
    .addColumn('ticket_type_id', 'integer', (c) => c.notNull().references('ticket_types.id'))
    .addColumn('measure', 'varchar(16)', (c) => c.notNull())
    .addColumn('event_id', 'integer', (c) => c.notNull())
    .addColumn('n', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('ticket_counts_pk', ['ticket_type_id', 'measure'])
    .execute()
  await db.schema.createIndex('ticket_counts_event').on('ticket_counts').column('event_id').execute()
  await db.schema
    .createTable('gate_use_counts')
    .addColumn('event_id', 'integer', (c) => c.notNull())
    .addColumn('gate', 'varchar(101)', (c) => c.notNull())
    .addColumn('n', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('gate_use_counts_pk', ['event_id', 'gate'])
    .execute()
  await db.schema
    .createTable('use_slot_counts')
    .addColumn('event_id', 'integer', (c) => c.notNull())
    .addColumn('slot', 'bigint', (c) => c.notNull())
    .addColumn('n', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('use_slot_counts_pk', ['event_id', 'slot'])
    .execute()
  await db.schema
    .createTable('delivery_counts')
    .addColumn('event_id', 'integer', (c) => c.notNull())
    .addColumn('status', 'varchar(16)', (c) => c.notNull())
    .addColumn('tried', 'integer', (c) => c.notNull())
    .addColumn('n', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('delivery_counts_pk', ['event_id', 'status', 'tried'])
    .execute()
  await counted(
    db,
    dialect,
    'transfers',
    [
      'ticket_type_id',
      'event_id',
      'balance',
      'promo_balance',
      'claimed_at',
      'used_at',
      'used_gate',
      'access_gate',
    ],
    TICKET_COUNTERS,
  )
  await counted(db, dialect, 'webhook_deliveries', ['event_id', 'status', 'attempts'], DELIVERY_COUNTERS)

  await db.schema
    .createIndex('transfers_event_type')
    .on('transfers')
    .columns(['event_id', 'ticket_type_id'])
    .execute()
  await db.schema
    .createIndex('transfers_event_uses')
    .on('transfers')
    .columns(['event_id', 'used_at'])
    .where(sql.ref('used_at'), 'is not', null)
    .execute()
  await db.schema
    .createIndex('webhook_deliveries_event_status')
    .on('webhook_deliveries')
    .columns(['event_id', 'status'])
    .execute()
  await db.schema
    .createIndex('webhook_deliveries_pending')
    .on('webhook_deliveries')
    .column('id')
    .where(sql.ref('status'), '=', 'pending')
    .execute()
  await db.schema
    .createIndex('webhook_attempts_failed')
    .on('webhook_attempts')
    .column('attempted_at')
    .where(sql<boolean>`status_code is null or status_code < 200 or status_code >= 300`)
    .execute()
  // Retention reads each table oldest first.
  await db.schema.createIndex('refresh_tokens_expires').on('refresh_tokens').column('expires_at').execute()
  await db.schema.createIndex('audit_log_at').on('audit_log').column('at').execute()
  await db.schema
    .createIndex('webhook_deliveries_created')
    .on('webhook_deliveries')
    .column('created_at')
    .execute()
  await db.schema
    .createIndex('holder_link_tokens_created')
    .on('holder_link_tokens')
    .column('created_at')
    .execute()

  // Rotated (and otherwise ended) refresh tokens are refused through their rows now.
  await sql`delete from revoked_tokens where jti in (select jti from refresh_tokens)`.execute(db)
}
