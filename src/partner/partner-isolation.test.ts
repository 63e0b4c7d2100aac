import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  newTicketType,
  type PartnerKeys,
  partnerGet,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { waitFor } from '../../test/helpers/until.js'

/**
 * The permission matrix of partners: A and B are two partners of event 1, C a partner of
 * event 2. Every partner route is called by each with another partner's identifiers: every cross read
 * or write is refused (404 as for something that does not exist, or 403 for another event), nothing
 * of the other partner shows in the answer, and nothing of the other partner changes.
 */
const EVENT1 = 'summer-fest-2026'
const EVENT2 = 'winter-fest-2026'

forEachBackend(
  httpBackends,
  'partners are isolated from each other',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let receiverA: Receiver
    let receiverB: Receiver
    let scanner: string
    // A's transfer and what must never reach B or C.
    const secretEmail = 'a-holder-private@example.com'
    let aTicket: string
    let aTransfer: { transfer_uid: string; company_ticket_id: string }
    let aDelivery: number
    const A = () => keys.write
    const B = () => keys.rival
    const C = () => keys.other

    const leaks = (res: LightMyRequestResponse) =>
      [secretEmail, aTransfer.transfer_uid, receiverA.url].filter((s) => res.body.includes(s))

    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      receiverA = await startReceiver()
      receiverB = await startReceiver()
      scanner = (await login(t, 'op@example.com', 'operator')).access_token
      const put = (key: string, url: string) =>
        t.request({ method: 'PUT', url: '/companies/webhook', headers: { api_key: key }, payload: { url } })
      assert.equal((await put(A(), receiverA.url)).statusCode, 200)
      assert.equal((await put(B(), receiverB.url)).statusCode, 200)
      aTicket = await newTicketType(t, A())
      const res = await partnerPost(t, '/companies/transfer', A(), {
        event_uid: EVENT1,
        email: secretEmail,
        ticket_uid: aTicket,
        company_ticket_id: 'T-1',
      })
      assert.equal(res.statusCode, 201, res.body)
      aTransfer = res.json()
      const used = await t.request({
        method: 'POST',
        url: `/tickets/${aTransfer.transfer_uid}/use`,
        token: scanner,
      })
      assert.equal(used.statusCode, 200, used.body)
      const list = await waitFor(async () => {
        const r = (await partnerGet(t, '/companies/webhook/deliveries', A())).json().deliveries
        return r.length > 0 && r
      })
      aDelivery = list[0].id
    })
    after(async () => {
      await receiverA.close()
      await receiverB.close()
    })

    test('a use notifies only the partner that transferred the ticket, at its own receiver', async () => {
      await waitFor(() => receiverA.log.length > 0)
      assert.ok(receiverA.log[0]!.body.includes(secretEmail))
      assert.equal(receiverB.log.length, 0, "B's receiver got A's notification")
      const b = await partnerGet(t, '/companies/webhook/deliveries', B())
      assert.equal(b.statusCode, 200)
      assert.deepEqual(b.json().deliveries, [])
    })

    test("the catalogue is the event's, shared by its partners; another event's is not", async () => {
      const b = await partnerGet(t, '/companies/tickets', B())
      assert.ok(b.json().tickets.some((x: { ticket_uid: string }) => x.ticket_uid === aTicket))
      const c = await partnerGet(t, '/companies/tickets', C())
      assert.ok(!c.body.includes(aTicket))
      const foreign = await partnerPost(t, '/companies/ticket', C(), {
        event_uid: EVENT1,
        name: 'x',
        price: 1,
        ticket_date: '2026-07-18T12:00:00.000',
      })
      assert.equal(foreign.statusCode, 403)
    })

    test("every cross read or write of A's transfer, receiver and deliveries is refused and leaks nothing", async () => {
      const id = aTransfer.company_ticket_id
      const calls: [string, string, string, unknown?, number?][] = [
        ['B', 'GET', `/companies/transfer/${id}`, undefined, 404],
        ['C', 'GET', `/companies/transfer/${id}`, undefined, 404],
        ['B', 'POST', `/companies/transfer/${id}/reissue`, undefined, 404],
        ['C', 'POST', `/companies/transfer/${id}/reissue`, undefined, 404],
        ['B', 'POST', `/companies/webhook/deliveries/${aDelivery}/retry`, undefined, 404],
        ['C', 'POST', `/companies/webhook/deliveries/${aDelivery}/retry`, undefined, 404],
        ['B', 'GET', '/companies/webhook/deliveries', undefined, 200],
        ['C', 'GET', '/companies/webhook/deliveries', undefined, 200],
        ['B', 'GET', '/companies/webhook', undefined, 200],
        ['C', 'GET', '/companies/webhook', undefined, 404],
        [
          'C',
          'POST',
          '/companies/transfer',
          { event_uid: EVENT1, email: 'x@example.com', ticket_uid: aTicket, company_ticket_id: 'c-1' },
          403,
        ],
        [
          'C',
          'POST',
          '/companies/transfer',
          { event_uid: EVENT2, email: 'x@example.com', ticket_uid: aTicket, company_ticket_id: 'c-1' },
          404,
        ],
        [
          'C',
          'POST',
          '/companies/transfers',
          {
            event_uid: EVENT1,
            transfers: [{ email: 'x@example.com', ticket_uid: aTicket, company_ticket_id: 'c-2' }],
          },
          403,
        ],
        [
          'C',
          'POST',
          '/companies/transfers',
          {
            event_uid: EVENT2,
            transfers: [{ email: 'x@example.com', ticket_uid: aTicket, company_ticket_id: 'c-2' }],
          },
          200,
        ],
      ]
      const keyOf = { B: B(), C: C() } as Record<string, string>
      for (const [who, method, url, payload, status] of calls) {
        const res = await t.request({
          method: method as 'GET',
          url,
          headers: { api_key: keyOf[who]! },
          ...(payload !== undefined ? { payload: payload as Record<string, unknown> } : {}),
        })
        assert.equal(res.statusCode, status, `${who} ${method} ${url}: ${res.body}`)
        assert.deepEqual(leaks(res), [], `${who} ${method} ${url} leaked`)
      }
      // Nothing of A's changed: its transfer keeps code version 1, its delivery was not retried.
      const a = await partnerGet(t, `/companies/transfer/${id}`, A())
      assert.equal(a.statusCode, 200)
      assert.equal(a.json().email, secretEmail)
      const row = await t.db.db
        .selectFrom('transfers')
        .select('code_version')
        .where('uid', '=', aTransfer.transfer_uid)
        .executeTakeFirstOrThrow()
      assert.equal(row.code_version, 1)
      const d = (await partnerGet(t, '/companies/webhook/deliveries', A())).json().deliveries[0]
      assert.equal(d.attempts, 1)
    })

    test("B's receiver changes never replace or remove A's", async () => {
      const put = await t.request({
        method: 'PUT',
        url: '/companies/webhook',
        headers: { api_key: B() },
        payload: { url: receiverB.url },
      })
      assert.equal(put.statusCode, 200)
      assert.deepEqual(leaks(put), [])
      const del = await t.request({ method: 'DELETE', url: '/companies/webhook', headers: { api_key: B() } })
      assert.equal(del.statusCode, 200)
      const c = await t.request({ method: 'DELETE', url: '/companies/webhook', headers: { api_key: C() } })
      assert.equal(c.statusCode, 404)
      const a = await partnerGet(t, '/companies/webhook', A())
      assert.equal(a.statusCode, 200)
      assert.equal(a.json().url, receiverA.url)
      assert.equal(a.json().enabled, true)
      // B registers again for the tests after this one.
      await t.request({
        method: 'PUT',
        url: '/companies/webhook',
        headers: { api_key: B() },
        payload: { url: receiverB.url },
      })
    })

    test("company_ticket_id is unique per partner: B may use A's T-1, which tells B nothing", async () => {
      const b = await partnerPost(t, '/companies/transfer', B(), {
        event_uid: EVENT1,
        email: 'b-holder@example.com',
        ticket_uid: aTicket,
        company_ticket_id: 'T-1',
      })
      assert.equal(b.statusCode, 201, b.body)
      assert.deepEqual(leaks(b), [])
      const again = await partnerPost(t, '/companies/transfer', B(), {
        event_uid: EVENT1,
        email: 'b-holder@example.com',
        ticket_uid: aTicket,
        company_ticket_id: 'T-1',
      })
      assert.equal(again.statusCode, 409)
      assert.equal(again.json().error, 'duplicate_company_ticket_id')
      // Each partner reads its own T-1.
      assert.equal((await partnerGet(t, '/companies/transfer/T-1', A())).json().email, secretEmail)
      assert.equal((await partnerGet(t, '/companies/transfer/T-1', B())).json().email, 'b-holder@example.com')
      // A use of B's ticket goes to B, not to A.
      const beforeA = receiverA.log.length
      const used = await t.request({
        method: 'POST',
        url: `/tickets/${b.json().transfer_uid}/use`,
        token: scanner,
      })
      assert.equal(used.statusCode, 200)
      await waitFor(() => receiverB.log.length > 0)
      assert.ok(receiverB.log.at(-1)!.body.includes('b-holder@example.com'))
      assert.equal(receiverA.log.length, beforeA)
    })

    test('a replacement key for the same partner carries its transfers, receiver and deliveries over', async () => {
      const { createApiKey } = await import('../api-keys/api-keys.store.js')
      const rotated = await createApiKey(t.db.db, {
        event_id: 1,
        name: 'Acme 2027',
        scopes: ['api:read', 'api:write'],
        created_by: null,
        now: t.clock.now(),
        partner: 'Acme',
      })
      const k = rotated.plaintext
      assert.equal(
        (await partnerGet(t, `/companies/transfer/${aTransfer.company_ticket_id}`, k)).json().email,
        secretEmail,
      )
      assert.equal((await partnerGet(t, '/companies/webhook', k)).json().url, receiverA.url)
      const ds = (await partnerGet(t, '/companies/webhook/deliveries', k)).json().deliveries
      assert.ok(ds.some((d: { id: number }) => d.id === aDelivery))
    })

    test('API keys name their partner when created and listed', async () => {
      const admin = (await login(t, 'ev1@example.com', 'admin')).access_token
      const created = await t.request({
        method: 'POST',
        url: '/tokens/api-key',
        token: admin,
        payload: { event_id: 1, name: 'Rival 2', scopes: ['api:read'], partner: 'Rival' },
      })
      assert.equal(created.statusCode, 200, created.body)
      assert.equal(created.json().partner, 'Rival')
      const rivalKey = created.json().api_key
      // Rival's new key sees Rival's T-1, not Acme's.
      assert.equal(
        (await partnerGet(t, '/companies/transfer/T-1', rivalKey)).json().email,
        'b-holder@example.com',
      )
      const own = await t.request({
        method: 'POST',
        url: '/tokens/api-key',
        token: admin,
        payload: { event_id: 1, name: 'Loner', scopes: ['api:read'] },
      })
      assert.match(own.json().partner, /^Loner \(key #\d+\)$/)
      assert.equal((await partnerGet(t, '/companies/transfer/T-1', own.json().api_key)).statusCode, 404)
      const list = await t.request({ method: 'GET', url: '/tokens/api-keys?event_id=1', token: admin })
      const partners = list.json().map((k: { partner: string }) => k.partner)
      assert.ok(partners.includes('Acme') && partners.includes('Rival'))
    })
  },
  { WEBHOOK_ALLOW_PRIVATE: 'true', JOBS_POLL_MS: '20' },
)
