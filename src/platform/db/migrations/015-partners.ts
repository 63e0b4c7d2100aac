import { type Kysely, sql } from 'kysely'
import type { MigrationContext } from './index.js'

/**
 * Partners: an event's ticket partners are isolated from each
 * other. Each API key belongs to a partner; transfers, `company_ticket_id` uniqueness, the webhook
 * receiver and its deliveries belong to a partner, not to the event.
 *
 * Today's data is assigned as follows (docs/partner-api.md, "Upgrading"):
 * - every existing key becomes a partner of its own, named `<key name> (<key prefix>)`;
 * - a transfer goes to the partner whose key created it when an idempotency record names it, otherwise
 *   to the event's first partner (the partner of its oldest key; a partner `legacy` when it has none);
 * - the event's receiver goes to the event's first partner (which key registered it was never
 *   recorded: with one key per event, which is how the API was used so far, that is its key's partner);
 * - a delivery goes to its transfer's partner, or to the receiver's.
 *
 * The per-event unique index of `company_ticket_id` becomes per partner, and `webhooks.event_id` is no
 * longer unique (one receiver per partner). SQLite cannot drop a column's UNIQUE, so its `webhooks`
 * table is rebuilt with the same rows and ids.
 */
export async function up(db: Kysely<unknown>, { id, dialect }: MigrationContext): Promise<void> {
  // biome-ignore lint/suspicious/noExplicitAny: a migration sees the schema of its own time, not schema.ts
  const q = db as Kysely<any>
  await id(db.schema.createTable('partners'))
    .addColumn('event_id', 'integer', (c) => c.notNull().references('events.id'))
    .addColumn('name', 'varchar(200)', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute()
  await db.schema
    .createIndex('partners_event_name')
    .on('partners')
    .columns(['event_id', 'name'])
    .unique()
    .execute()

  for (const table of ['event_clients', 'transfers', 'webhook_deliveries'])
    await db.schema
      .alterTable(table)
      .addColumn('partner_id', 'integer', (c) => c.references('partners.id'))
      .execute()

  if (dialect === 'postgres') {
    await db.schema
      .alterTable('webhooks')
      .addColumn('partner_id', 'integer', (c) => c.references('partners.id'))
      .execute()
    await sql`alter table webhooks drop constraint if exists webhooks_event_id_key`.execute(db)
  } else {
    await sql`create table webhooks_015 (
      id integer primary key autoincrement,
      event_id integer not null references events(id),
      partner_id integer references partners(id),
      url varchar(2048) not null,
      secret text not null,
      disabled_at bigint,
      disabled_reason varchar(200),
      created_at bigint not null,
      updated_at bigint not null
    )`.execute(db)
    await sql`insert into webhooks_015 (id, event_id, url, secret, disabled_at, disabled_reason, created_at, updated_at)
      select id, event_id, url, secret, disabled_at, disabled_reason, created_at, updated_at from webhooks`.execute(
      db,
    )
    await sql`drop table webhooks`.execute(db)
    await sql`alter table webhooks_015 rename to webhooks`.execute(db)
  }
  await db.schema.createIndex('webhooks_event').on('webhooks').column('event_id').execute()

  // Today's data.
  const now = Date.now()
  const keys: { id: number; event_id: number; name: string; key_prefix: string }[] = await q
    .selectFrom('event_clients')
    .select(['id', 'event_id', 'name', 'key_prefix'])
    .orderBy('id')
    .execute()
  const firstPartner = new Map<number, number>()
  const partnerOfKey = new Map<number, number>()
  for (const k of keys) {
    const p = await q
      .insertInto('partners')
      .values({ event_id: k.event_id, name: `${k.name} (${k.key_prefix})`, created_at: now })
      .returning('id')
      .executeTakeFirstOrThrow()
    await q.updateTable('event_clients').set({ partner_id: p.id }).where('id', '=', k.id).execute()
    partnerOfKey.set(k.id, p.id)
    if (!firstPartner.has(k.event_id)) firstPartner.set(k.event_id, p.id)
  }
  const partnerOfEvent = async (eventId: number): Promise<number> => {
    let p = firstPartner.get(eventId)
    if (p === undefined) {
      p = (
        await q
          .insertInto('partners')
          .values({ event_id: eventId, name: 'legacy', created_at: now })
          .returning('id')
          .executeTakeFirstOrThrow()
      ).id as number
      firstPartner.set(eventId, p)
    }
    return p
  }

  // Transfers a key's idempotency record names. The record holds the answer's body as it was sent (what
  // every release before this one wrote: keepAnswer in partner/idempotency.store.ts), so the body of a
  // 201 to POST /companies/transfer names its transfer at the top level.
  const records: { api_key_id: number; response: string | null }[] = await q
    .selectFrom('idempotency_keys')
    .select(['api_key_id', 'response'])
    .where('response', 'is not', null)
    .execute()
  for (const r of records) {
    const partner = partnerOfKey.get(r.api_key_id)
    let uid: unknown
    try {
      uid = (JSON.parse(r.response!) as { transfer_uid?: unknown } | null)?.transfer_uid
    } catch {
      continue
    }
    if (partner === undefined || typeof uid !== 'string') continue
    await q
      .updateTable('transfers')
      .set({ partner_id: partner })
      .where('uid', '=', uid)
      .where('partner_id', 'is', null)
      .execute()
  }
  const eventsWithTransfers: { event_id: number }[] = await q
    .selectFrom('transfers')
    .select('event_id')
    .where('partner_id', 'is', null)
    .groupBy('event_id')
    .execute()
  for (const { event_id } of eventsWithTransfers)
    await q
      .updateTable('transfers')
      .set({ partner_id: await partnerOfEvent(event_id) })
      .where('event_id', '=', event_id)
      .where('partner_id', 'is', null)
      .execute()

  const hooks: { id: number; event_id: number }[] = await q
    .selectFrom('webhooks')
    .select(['id', 'event_id'])
    .execute()
  for (const h of hooks)
    await q
      .updateTable('webhooks')
      .set({ partner_id: await partnerOfEvent(h.event_id) })
      .where('id', '=', h.id)
      .execute()
  await sql`update webhook_deliveries set partner_id = (select t.partner_id from transfers t where t.id = webhook_deliveries.transfer_id)
    where transfer_id is not null`.execute(db)
  await sql`update webhook_deliveries set partner_id = (select min(w.partner_id) from webhooks w where w.event_id = webhook_deliveries.event_id)
    where partner_id is null`.execute(db)

  await db.schema.dropIndex('transfers_company_ticket_id').execute()
  // The rule "a company_ticket_id is used once per partner" lives here, so concurrent requests cannot race.
  await db.schema
    .createIndex('transfers_partner_company_ticket_id')
    .on('transfers')
    .columns(['partner_id', 'company_ticket_id'])
    .unique()
    .execute()
  await db.schema.createIndex('webhooks_partner').on('webhooks').column('partner_id').unique().execute()
  await db.schema
    .createIndex('webhook_deliveries_partner')
    .on('webhook_deliveries')
    .columns(['partner_id', 'id'])
    .execute()
  await db.schema.createIndex('event_clients_partner').on('event_clients').column('partner_id').execute()
}
