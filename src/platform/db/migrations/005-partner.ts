import { type Kysely, sql } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Ticket partner API: ticket types, transfers grouped under holder links, wallets, idempotency keys,
 * and webhooks with their deliveries and attempts. Money is integer minor units (cents).
 */
export async function up(db: Kysely<unknown>, { id }: MigrationContext): Promise<void> {
  await id(db.schema.createTable('ticket_types'))
    .addColumn('uid', 'varchar(32)', (c) => c.notNull().unique())
    .addColumn('event_id', 'integer', (c) => c.notNull().references('events.id'))
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    .addColumn('price', 'bigint', (c) => c.notNull())
    .addColumn('ticket_date', 'varchar(23)', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('ticket_types_event').on('ticket_types').column('event_id').execute()

  await id(db.schema.createTable('holder_links'))
    .addColumn('event_id', 'integer', (c) => c.notNull().references('events.id'))
    .addColumn('email', 'varchar(254)', (c) => c.notNull())
    .addColumn('claimed_by', 'integer', (c) => c.references('customers.id'))
    .addColumn('claimed_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute()
  // One open link per address and event; once claimed, later transfers start a new one.
  await db.schema
    .createIndex('holder_links_open')
    .on('holder_links')
    .columns(['event_id', 'email'])
    .unique()
    .where(sql.ref('claimed_at'), 'is', null)
    .execute()

  await db.schema
    .createTable('holder_link_tokens')
    .addColumn('token_hash', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('link_id', 'integer', (c) => c.notNull().references('holder_links.id'))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute()

  await id(db.schema.createTable('transfers'))
    .addColumn('uid', 'varchar(32)', (c) => c.notNull().unique())
    .addColumn('event_id', 'integer', (c) => c.notNull().references('events.id'))
    .addColumn('ticket_type_id', 'integer', (c) => c.notNull().references('ticket_types.id'))
    .addColumn('company_ticket_id', 'varchar(100)', (c) => c.notNull())
    .addColumn('email', 'varchar(254)', (c) => c.notNull())
    .addColumn('balance', 'bigint', (c) => c.notNull())
    .addColumn('promo_balance', 'bigint', (c) => c.notNull())
    .addColumn('access_gate', 'varchar(100)')
    .addColumn('seat_number', 'varchar(100)')
    .addColumn('link_id', 'integer', (c) => c.notNull().references('holder_links.id'))
    .addColumn('customer_id', 'integer', (c) => c.references('customers.id'))
    .addColumn('status', 'varchar(16)', (c) => c.notNull())
    .addColumn('mailed_at', 'bigint')
    .addColumn('claimed_at', 'bigint')
    .addColumn('used_at', 'bigint')
    .addColumn('used_timestamp', 'varchar(23)')
    .addColumn('used_gate', 'varchar(100)')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute()
  // The rule "a company_ticket_id is used once per event" lives here, so concurrent requests cannot race.
  await db.schema
    .createIndex('transfers_company_ticket_id')
    .on('transfers')
    .columns(['event_id', 'company_ticket_id'])
    .unique()
    .execute()
  await db.schema.createIndex('transfers_link').on('transfers').columns(['link_id', 'mailed_at']).execute()
  await db.schema.createIndex('transfers_customer').on('transfers').column('customer_id').execute()

  await db.schema
    .createTable('wallets')
    .addColumn('customer_id', 'integer', (c) => c.notNull().references('customers.id'))
    .addColumn('event_id', 'integer', (c) => c.notNull().references('events.id'))
    .addColumn('balance', 'bigint', (c) => c.notNull())
    .addColumn('promo_balance', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('wallets_pk', ['customer_id', 'event_id'])
    .execute()

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('api_key_id', 'integer', (c) => c.notNull())
    .addColumn('key', 'varchar(255)', (c) => c.notNull())
    .addColumn('request_hash', 'varchar(64)', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('response', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['api_key_id', 'key'])
    .execute()
  await db.schema
    .createIndex('idempotency_keys_created')
    .on('idempotency_keys')
    .column('created_at')
    .execute()

  await id(db.schema.createTable('webhooks'))
    .addColumn('event_id', 'integer', (c) => c.notNull().unique().references('events.id'))
    .addColumn('url', 'varchar(2048)', (c) => c.notNull())
    // The signing key must be readable to sign; it is shown to the partner once, at registration.
    .addColumn('secret', 'varchar(100)', (c) => c.notNull())
    .addColumn('disabled_at', 'bigint')
    .addColumn('disabled_reason', 'varchar(200)')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute()

  await id(db.schema.createTable('webhook_deliveries'))
    .addColumn('uid', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('event_id', 'integer', (c) => c.notNull().references('events.id'))
    .addColumn('transfer_id', 'integer', (c) => c.references('transfers.id'))
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('status', 'varchar(16)', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'bigint')
    .addColumn('delivered_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute()
  await db.schema
    .createIndex('webhook_deliveries_event')
    .on('webhook_deliveries')
    .columns(['event_id', 'id'])
    .execute()

  await id(db.schema.createTable('webhook_attempts'))
    .addColumn('delivery_id', 'integer', (c) => c.notNull().references('webhook_deliveries.id'))
    .addColumn('attempted_at', 'bigint', (c) => c.notNull())
    .addColumn('url', 'varchar(2048)', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('error', 'varchar(500)')
    .addColumn('response_body', 'text')
    .execute()
  await db.schema
    .createIndex('webhook_attempts_delivery')
    .on('webhook_attempts')
    .column('delivery_id')
    .execute()
}
