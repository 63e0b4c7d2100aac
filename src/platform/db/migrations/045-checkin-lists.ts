import { type Kysely, sql } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * The gate's check-in lists (docs/gate.md). New tables only, so the previous release keeps running
 * beside this one (its uses are not logged as scans; they still make tickets USED once).
 *
 * - `checkin_lists`: an event's lists and their rules. `default_of` is the event's id on its default
 *   list (the specification's single use) and null on the others: unique, so the default list created
 *   lazily for a new event exists once however many scans race to create it.
 * - `checkins`: every scan on a list, accepted or refused (who, where, when, why). `nonce` is unique: an
 *   offline upload sent again counts nothing twice.
 * - `checkin_presence`: per list and ticket, since when the ticket is inside (null: out). The scans of a
 *   ticket on a list serialise on this row; `exit_all_at` counts out the rows inside before its moment.
 * - `checkin_counts`: the counters a list's status reads in O(1) (entries, exits, inside, counted out,
 *   refused by reason, entries per event-local hour), kept with the scans in their transactions.
 *
 * Every existing event gets its default list, and every ticket used so far an accepted entry on it
 * (at its use), so the status of an event scanned before this release starts right.
 */
export async function up(db: Kysely<unknown>, ctx: MigrationContext): Promise<void> {
  await ctx
    .id(db.schema.createTable('checkin_lists'))
    .addColumn('event_id', 'integer', (c) => c.notNull().references('events.id'))
    .addColumn('default_of', 'integer', (c) => c.unique())
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    .addColumn('ticket_type_ids', 'text')
    .addColumn('allow_multiple_entries', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('allow_entry_after_exit', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('windows', 'text')
    .addColumn('exit_all_at', 'varchar(5)')
    .addColumn('counted_out_until', 'varchar(19)')
    .addColumn('archived_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('checkin_lists_event').on('checkin_lists').column('event_id').execute()

  await ctx
    .id(db.schema.createTable('checkins'))
    .addColumn('event_id', 'integer', (c) => c.notNull())
    .addColumn('list_id', 'integer', (c) => c.notNull().references('checkin_lists.id'))
    .addColumn('transfer_id', 'integer')
    .addColumn('transfer_uid', 'varchar(64)', (c) => c.notNull())
    .addColumn('direction', 'varchar(5)', (c) => c.notNull())
    .addColumn('result', 'varchar(8)', (c) => c.notNull())
    .addColumn('reason', 'varchar(20)')
    .addColumn('first_use', 'integer')
    .addColumn('scanned_at', 'bigint', (c) => c.notNull())
    .addColumn('local_at', 'varchar(23)', (c) => c.notNull())
    .addColumn('gate', 'varchar(100)')
    .addColumn('device_id', 'varchar(64)')
    .addColumn('actor', 'varchar(100)', (c) => c.notNull())
    .addColumn('offline', 'integer')
    .addColumn('nonce', 'varchar(64)', (c) => c.unique())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute()
  // A ticket's scans on a list (the rule's prior scans); the log's pages and filters, newest first.
  await db.schema
    .createIndex('checkins_list_ticket')
    .on('checkins')
    .columns(['list_id', 'transfer_id'])
    .execute()
  await db.schema.createIndex('checkins_event_id').on('checkins').columns(['event_id', 'id']).execute()
  await db.schema.createIndex('checkins_list_id').on('checkins').columns(['list_id', 'id']).execute()
  for (const column of ['result', 'reason', 'device_id'])
    await db.schema
      .createIndex(`checkins_event_${column}`)
      .on('checkins')
      .columns(['event_id', column, 'id'])
      .execute()

  await db.schema
    .createTable('checkin_presence')
    .addColumn('list_id', 'integer', (c) => c.notNull())
    .addColumn('transfer_id', 'integer', (c) => c.notNull())
    .addColumn('inside_since', 'varchar(19)')
    .addPrimaryKeyConstraint('checkin_presence_pk', ['list_id', 'transfer_id'])
    .execute()
  await db.schema
    .createIndex('checkin_presence_inside')
    .on('checkin_presence')
    .columns(['list_id', 'inside_since'])
    .execute()

  await db.schema
    .createTable('checkin_counts')
    .addColumn('list_id', 'integer', (c) => c.notNull())
    .addColumn('measure', 'varchar(40)', (c) => c.notNull())
    .addColumn('n', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('checkin_counts_pk', ['list_id', 'measure'])
    .execute()

  // Existing events: their default lists, and their tickets' uses as accepted entries on them.
  const now = Date.now()
  await sql`insert into checkin_lists
      (event_id, default_of, name, allow_multiple_entries, allow_entry_after_exit, created_at, updated_at)
    select id, id, 'Default', 0, 0, ${now}, ${now} from events`.execute(db)
  await sql`insert into checkins
      (event_id, list_id, transfer_id, transfer_uid, direction, result, first_use, scanned_at, local_at,
       gate, actor, created_at)
    select t.event_id, l.id, t.id, t.uid, 'entry', 'accepted', 1, t.used_at, t.used_timestamp, t.used_gate,
       'use before check-in lists', t.used_at
    from transfers t join checkin_lists l on l.default_of = t.event_id
    where t.used_at is not null and t.used_timestamp is not null`.execute(db)
  await sql`insert into checkin_presence (list_id, transfer_id, inside_since)
    select list_id, transfer_id, substr(local_at, 1, 19) from checkins`.execute(db)
  for (const measure of ['entries', 'inside'])
    await sql`insert into checkin_counts (list_id, measure, n)
      select list_id, ${measure}, count(*) from checkins group by list_id`.execute(db)
  await sql`insert into checkin_counts (list_id, measure, n)
    select list_id, 'hour:' || substr(local_at, 1, 13), count(*) from checkins
    group by list_id, substr(local_at, 1, 13)`.execute(db)
}
