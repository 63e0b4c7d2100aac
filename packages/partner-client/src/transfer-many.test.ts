// transferMany against the real service on a socket, on SQLite and PostgreSQL.
import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../../test/helpers/app.js'
import { httpBackends } from '../../../test/helpers/backends.js'
import { newTicketType, type PartnerKeys, seedPartner } from '../../../test/helpers/partner.js'
import { createPartnerClient, type PartnerClient } from './client.js'
import { transferMany } from './transfer-many.js'

forEachBackend(
  httpBackends,
  'partner client transferMany',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let client: PartnerClient
    let ticket: string
    let requests = 0
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      ticket = await newTicketType(t, keys.write)
      await t.app.listen({ port: 0, host: '127.0.0.1' })
      const baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`
      client = createPartnerClient({
        baseUrl,
        apiKey: keys.write,
        fetch: (input, init) => {
          requests++
          return fetch(input, init)
        },
      })
    })

    const items = (n: number, prefix: string) =>
      Array.from({ length: n }, (_, i) => ({
        email: `h${i % 7}@example.com`,
        ticket_uid: ticket,
        company_ticket_id: `${prefix}-${i}`,
      }))

    test('1,201 transfers go out in chunks of 500, answered one by one in the order given', async () => {
      const transfers = items(1201, 'tm')
      transfers[1200] = { ...transfers[1200]!, company_ticket_id: 'tm-0' }
      const progress: number[] = []
      const before = requests
      const results = await transferMany(client, 'summer-fest-2026', transfers, {
        onProgress: (done) => progress.push(done),
      })
      assert.equal(requests - before, 3)
      assert.equal(results.length, 1201)
      assert.deepEqual(
        results.map((r) => r.company_ticket_id),
        transfers.map((x) => x.company_ticket_id),
      )
      assert.equal(results.filter((r) => r.status === 201).length, 1200)
      assert.equal(results[1200]!.status, 409)
      assert.equal(results[1200]!.error?.error, 'duplicate_company_ticket_id')
      assert.equal(progress.length, 3)
      assert.equal(Math.max(...progress), 1201)
    })

    test('a run resumed by its runId makes nothing twice and answers the same transfers', async () => {
      const transfers = items(700, 'rs')
      const first = await transferMany(client, 'summer-fest-2026', transfers.slice(0, 500), {
        runId: 'run-7',
      })
      // The run "stopped" after its first chunk; resuming sends every chunk again under the same keys.
      const resumed = await transferMany(client, 'summer-fest-2026', transfers, { runId: 'run-7' })
      assert.deepEqual(
        resumed.slice(0, 500).map((r) => ('transfer' in r ? r.transfer.transfer_uid : r.status)),
        first.map((r) => ('transfer' in r ? r.transfer.transfer_uid : r.status)),
      )
      assert.equal(resumed.filter((r) => r.status === 201).length, 700)
      const rows = await t.db.db
        .selectFrom('transfers')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('company_ticket_id', 'like', 'rs-%')
        .executeTakeFirstOrThrow()
      assert.equal(Number(rows.n), 700)
    })
  },
  { PARTNER_RATE_LIMIT: '6000' },
)
