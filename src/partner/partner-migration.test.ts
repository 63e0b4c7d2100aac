import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type Kysely, Migrator } from 'kysely'
import { eachBackend, httpBackends, useDatabase } from '../../test/helpers/backends.js'
import { migrationProvider } from '../platform/db/migrations/index.js'

/**
 * Migration 015 gives today's data to partners (docs/partner-api.md, "Upgrading"): every key a partner
 * of its own; a transfer to the partner whose key's idempotency record names it, else to the event's
 * first partner; the receiver and its deliveries to the event's first partner.
 */
eachBackend(httpBackends, 'migration 015 assigns existing data to partners', (backend) => {
  // Unmigrated: the test migrates to 014, writes that release's rows, then applies 015.
  const database = useDatabase(backend, { migrate: false })

  test('keys, transfers, the receiver and deliveries of before 015 belong to partners after it', async () => {
    const handle = database.handle()
    const migrator = new Migrator({
      db: handle.db,
      provider: migrationProvider(handle.dialect),
      ...(handle.dialect === 'postgres' ? { migrationTableSchema: database.env().DATABASE_SCHEMA! } : {}),
    })
    const to14 = await migrator.migrateTo('014-gate')
    assert.equal(to14.error, undefined)
    // biome-ignore lint/suspicious/noExplicitAny: the schema of release 014, not of schema.ts
    const db = handle.db as unknown as Kysely<any>
    const now = Date.now()
    const transferRow = (id: number, uid: string, company_ticket_id: string, partner_id?: number) => ({
      id,
      uid,
      event_id: 1,
      ...(partner_id !== undefined ? { partner_id } : {}),
      ticket_type_id: 1,
      company_ticket_id,
      email: 'h@example.com',
      balance: 0,
      promo_balance: 0,
      link_id: 1,
      status: 'TRANSFERRED',
      created_at: now,
    })
    await db
      .insertInto('events')
      .values({ id: 1, uid: 'e1', name: 'E1', timezone: 'UTC', created_at: now })
      .execute()
    for (const [id, name] of [
      [1, 'first'],
      [2, 'second'],
    ] as const)
      await db
        .insertInto('event_clients')
        .values({
          id,
          event_id: 1,
          name,
          scopes: '["api:write"]',
          token_hash: `h${id}`,
          key_prefix: `wb_${id}`,
          created_at: now,
        })
        .execute()
    await db
      .insertInto('ticket_types')
      .values({
        id: 1,
        uid: 'tt',
        event_id: 1,
        name: 'Day',
        price: 100,
        ticket_date: '2026-07-18T12:00:00.000',
        created_at: now,
      })
      .execute()
    await db
      .insertInto('holder_links')
      .values({ id: 1, event_id: 1, email: 'h@example.com', created_at: now, updated_at: now })
      .execute()
    for (const [id, uid] of [
      [1, 'tr-of-second'],
      [2, 'tr-unknown'],
    ] as const)
      await db
        .insertInto('transfers')
        .values(transferRow(id, uid, `c${id}`))
        .execute()
    await db
      .insertInto('idempotency_keys')
      .values({
        api_key_id: 2,
        key: 'k',
        request_hash: 'x',
        status_code: 201,
        // The answer's body as the releases before 015 stored it (keepAnswer): the 201 of POST /companies/transfer.
        response: JSON.stringify({
          transfer_uid: 'tr-of-second',
          ticket_uid: 'tt',
          company_ticket_id: 'c1',
          email: 'h@example.com',
          status: 'TRANSFERRED',
          created_at: '2026-07-18T12:00:00.000',
        }),
        created_at: now,
      })
      .execute()
    // An error answer names no transfer, and leaves the transfers as they are.
    await db
      .insertInto('idempotency_keys')
      .values({
        api_key_id: 1,
        key: 'k',
        request_hash: 'y',
        status_code: 409,
        response: JSON.stringify({
          detail: 'company_ticket_id already used',
          error: 'duplicate_company_ticket_id',
        }),
        created_at: now,
      })
      .execute()
    await db
      .insertInto('webhooks')
      .values({
        id: 1,
        event_id: 1,
        url: 'https://r.example/x',
        secret: 'whsec_x',
        created_at: now,
        updated_at: now,
      })
      .execute()
    await db
      .insertInto('webhook_deliveries')
      .values({
        id: 1,
        uid: 'msg_1',
        event_id: 1,
        transfer_id: 1,
        payload: '{}',
        status: 'delivered',
        created_at: now,
      })
      .execute()
    await db
      .insertInto('webhook_deliveries')
      .values({
        id: 2,
        uid: 'msg_2',
        event_id: 1,
        transfer_id: null,
        payload: '{}',
        status: 'delivered',
        created_at: now,
      })
      .execute()

    await handle.migrate()

    const keys = await db.selectFrom('event_clients').select(['id', 'partner_id']).orderBy('id').execute()
    const partners = await db.selectFrom('partners').select(['id', 'name']).orderBy('id').execute()
    assert.deepEqual(
      partners.map((x: { name: string }) => x.name),
      ['first (wb_1)', 'second (wb_2)'],
    )
    const [first, second] = keys.map((k: { partner_id: number }) => k.partner_id)
    assert.notEqual(first, second)
    const transfers = await db.selectFrom('transfers').select(['uid', 'partner_id']).orderBy('id').execute()
    assert.deepEqual(transfers, [
      { uid: 'tr-of-second', partner_id: second },
      { uid: 'tr-unknown', partner_id: first },
    ])
    const hook = await db.selectFrom('webhooks').select(['id', 'partner_id', 'url']).executeTakeFirstOrThrow()
    assert.deepEqual(hook, { id: 1, partner_id: first, url: 'https://r.example/x' })
    const deliveries = await db
      .selectFrom('webhook_deliveries')
      .select(['id', 'partner_id'])
      .orderBy('id')
      .execute()
    assert.deepEqual(deliveries, [
      { id: 1, partner_id: second },
      { id: 2, partner_id: first },
    ])
    // company_ticket_id is unique per partner now: the other partner may use c1.
    await db
      .insertInto('transfers')
      .values(transferRow(3, 'tr-new', 'c1', first))
      .execute()
    await assert.rejects(
      db
        .insertInto('transfers')
        .values(transferRow(4, 'tr-dup', 'c1', first))
        .execute(),
    )
    // A second receiver for the event (another partner's) is allowed now; a second for one partner is not.
    await db
      .insertInto('webhooks')
      .values({
        id: 2,
        event_id: 1,
        partner_id: second,
        url: 'https://r.example/y',
        secret: 's',
        created_at: now,
        updated_at: now,
      })
      .execute()
  })
})
