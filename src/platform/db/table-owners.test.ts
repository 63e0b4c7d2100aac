import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'

/**
 * One owner per table (docs/architecture.md, "Tables and their owners"): the owning store is the only
 * module that writes the table, and the only one that reads it, except for the read joins listed in
 * READ_JOINS with their reason. The ticket ledger (`transfers`) and its feed position are the
 * ledger's (src/transfers/), which every feature that issues, claims, uses or re-issues a ticket calls.
 * Counter tables are written by database triggers (migration 019), never by a store.
 */
const OWNERS: Record<string, string> = {
  administrators: 'src/identities/identities.store.ts',
  network_managers: 'src/identities/identities.store.ts',
  users: 'src/identities/identities.store.ts',
  customers: 'src/consumers/consumers.store.ts',
  phone_verifications: 'src/consumers/consumers.store.ts',
  phone_codes: 'src/consumers/phone-codes.store.ts',
  customer_identities: 'src/idp/idp.store.ts',
  dashboard_users: 'src/dashboard/dashboard-users.store.ts',
  dashboard_sessions: 'src/dashboard/sessions.store.ts',
  ticket_counts: 'src/dashboard/stats.store.ts',
  gate_use_counts: 'src/dashboard/stats.store.ts',
  use_slot_counts: 'src/dashboard/stats.store.ts',
  delivery_counts: 'src/dashboard/stats.store.ts',
  password_reset_tokens: 'src/password-reset/password-reset.store.ts',
  password_reset_requests: 'src/password-reset/password-reset.store.ts',
  events: 'src/events/events.store.ts',
  event_clients: 'src/api-keys/api-keys.store.ts',
  partners: 'src/api-keys/api-keys.store.ts',
  passkeys: 'src/passkeys/passkeys.store.ts',
  webauthn_challenges: 'src/passkeys/passkeys.store.ts',
  devices: 'src/devices/devices.store.ts',
  operator_sessions: 'src/devices/devices.store.ts',
  device_setup_codes: 'src/devices/setup-codes.store.ts',
  ticket_types: 'src/partner/partner.store.ts',
  transfers: 'src/transfers/transfers.store.ts',
  checkins: 'src/transfers/checkins.store.ts',
  checkin_presence: 'src/transfers/checkins.store.ts',
  checkin_counts: 'src/transfers/checkins.store.ts',
  checkin_lists: 'src/checkin/checkin-lists.store.ts',
  holder_links: 'src/holder/holder.store.ts',
  holder_link_tokens: 'src/holder/holder.store.ts',
  wallets: 'src/holder/holder.store.ts',
  idempotency_keys: 'src/partner/idempotency.store.ts',
  webhooks: 'src/webhooks/webhooks.store.ts',
  webhook_deliveries: 'src/webhooks/webhooks.store.ts',
  webhook_attempts: 'src/webhooks/webhooks.store.ts',
  jobs: 'src/platform/jobs/jobs.ts',
  refresh_tokens: 'src/tokens/refresh.store.ts',
  revoked_tokens: 'src/tokens/revocations.store.ts',
  audit_log: 'src/audit/audit.store.ts',
  audit_sink: 'src/audit/audit.store.ts',
}

/** Reads of a table outside its owner, each one join on a hot path where a second query would cost. */
const READ_JOINS: Record<string, string[]> = {
  // a ticket's event (time zone, name) read with the ticket, at the gate and on holder pages; a claim
  // link's event; a device's event
  events: ['src/devices/devices.store.ts', 'src/holder/holder.store.ts', 'src/transfers/transfers.store.ts'],
  // the ticket ledger and its catalogue, read by the dashboard's figures and with every ticket the ledger
  // serves (its type's uid, name and date)
  transfers: ['src/dashboard/stats.store.ts'],
  ticket_types: ['src/dashboard/stats.store.ts', 'src/transfers/transfers.store.ts'],
  // the operator of a session, read with the session on every operator request
  users: ['src/devices/devices.store.ts'],
  // the dashboard's delivery page and figures
  webhooks: ['src/dashboard/stats.store.ts'],
  webhook_deliveries: ['src/dashboard/stats.store.ts'],
  webhook_attempts: ['src/dashboard/stats.store.ts'],
  // the /metrics pending count, read from the counters
  delivery_counts: ['src/webhooks/webhooks.store.ts'],
}

const WRITE = /\b(insertInto|updateTable|deleteFrom)\(\s*'([a-z_]+)(?: as [a-z_]+)?'/g
const READ = /\b(selectFrom|innerJoin|leftJoin)\(\s*'([a-z_]+)(?: as [a-z_]+)?'/g

function sources(): string[] {
  return fs
    .readdirSync('src', { recursive: true })
    .map((f) => path.join('src', String(f)))
    .filter(
      (f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && !f.includes(`${path.sep}migrations${path.sep}`),
    )
}

function uses(pattern: RegExp): { table: string; file: string }[] {
  return sources().flatMap((file) =>
    [...fs.readFileSync(file, 'utf8').matchAll(pattern)].map((m) => ({ table: m[2]!, file })),
  )
}

test('every table of the schema has one owning store', () => {
  const schema = fs.readFileSync('src/platform/db/schema.ts', 'utf8')
  const body = schema.slice(schema.indexOf('export interface Database {'))
  const tables = [...body.slice(0, body.indexOf('}')).matchAll(/^\s+([a-z_]+): /gm)].map((m) => m[1]!)
  assert.ok(tables.length > 20, 'the Database interface was not found')
  assert.deepEqual(
    tables.filter((t) => !(t in OWNERS)),
    [],
    'tables without an owner in OWNERS',
  )
  for (const owner of new Set(Object.values(OWNERS))) assert.ok(fs.existsSync(owner), `${owner} is gone`)
})

test('only a table’s owner writes it', () => {
  const strays = uses(WRITE).filter(({ table, file }) => file !== OWNERS[table])
  assert.deepEqual([...new Set(strays.map((s) => `${s.table} written by ${s.file}`))], [])
})

test('a table is read outside its owner only in the listed joins', () => {
  const strays = uses(READ).filter(
    ({ table, file }) => file !== OWNERS[table] && !READ_JOINS[table]?.includes(file),
  )
  assert.deepEqual([...new Set(strays.map((s) => `${s.table} read by ${s.file}`))], [])
})

test('the sync-feed position moves only with the ledger', () => {
  // The position is a column of `events` (its store holds the counter); only a change of the ledger
  // takes one, in that change's transaction, so a cursor never passes a change.
  const movers = sources().filter(
    (file) =>
      ![OWNERS.events, OWNERS.transfers].includes(file) &&
      /\b(nextFeedSeq|reserveFeedSeqs)\b/.test(fs.readFileSync(file, 'utf8')),
  )
  assert.deepEqual(movers, [])
})
