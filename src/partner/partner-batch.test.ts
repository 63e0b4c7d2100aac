import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  newTicketType,
  type PartnerKeys,
  partnerGet,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'

const EVENT = 'summer-fest-2026'

/** POST /companies/transfers, up to 500 transfers answered one by one, idempotent as a whole. */
forEachBackend(httpBackends, 'batch transfers', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  let ticket: string
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
    ticket = await newTicketType(t, keys.write)
  })
  const item = (id: string, over: Record<string, unknown> = {}) => ({
    email: `${id}@example.com`,
    ticket_uid: ticket,
    company_ticket_id: id,
    ...over,
  })
  const batch = (key: string, transfers: unknown[], headers: Record<string, string> = {}) =>
    partnerPost(t, '/companies/transfers', key, { event_uid: EVENT, transfers }, headers)

  test('each transfer is answered on its own: made, duplicate, unknown ticket, invalid amount', async () => {
    assert.equal(
      (await partnerPost(t, '/companies/transfer', keys.write, { event_uid: EVENT, ...item('b-old') }))
        .statusCode,
      201,
    )
    const res = await batch(keys.write, [
      item('b-1', { email: 'Group@Example.com', balance: 10.5 }),
      item('b-2', { email: 'group@example.com', additional_info: { seat_number: '12A' } }),
      item('b-old'),
      item('b-1'),
      item('b-3', { ticket_uid: 'f'.repeat(32) }),
      item('b-4', { balance: 1.005 }),
      item('b-5'),
      item('b-6', { ticket_uid: 'not-a-ticket-uid' }),
      item('b-7', { email: 'not an address', extra: 1 }),
      { email: 'b-8@example.com', ticket_uid: ticket },
      'not a transfer',
    ])
    assert.equal(res.statusCode, 200, res.body)
    const results = res.json().results
    assert.deepEqual(
      results.map((r: { company_ticket_id: string; status: number }) => [r.company_ticket_id, r.status]),
      [
        ['b-1', 201],
        ['b-2', 201],
        ['b-old', 409],
        ['b-1', 409],
        ['b-3', 404],
        ['b-4', 422],
        ['b-5', 201],
        ['b-6', 422],
        ['b-7', 422],
        [null, 422],
        [null, 422],
      ],
    )
    // A transfer that breaks the schema is answered as POST /companies/transfer would answer it, with
    // `loc` in the batch's body; the others are made.
    assert.deepEqual(
      results[7].error.detail.map((d: { loc: unknown[]; type: string }) => [d.loc, d.type]),
      [[['body', 'transfers', 7, 'ticket_uid'], 'string_pattern_mismatch']],
    )
    assert.deepEqual(
      results[8].error.detail.map((d: { loc: unknown[]; type: string }) => [d.loc, d.type]).sort(),
      [
        [['body', 'transfers', 8, 'email'], 'string_pattern_mismatch'],
        [['body', 'transfers', 8, 'extra'], 'extra_forbidden'],
      ],
    )
    assert.deepEqual(results[9].error.detail[0].loc, ['body', 'transfers', 9, 'company_ticket_id'])
    assert.equal(results[9].error.detail[0].type, 'missing')
    assert.deepEqual(results[10].error.detail[0].loc, ['body', 'transfers', 10])
    assert.equal(results[2].error.error, 'duplicate_company_ticket_id')
    assert.deepEqual(results[5].error.detail[0].loc, ['body', 'transfers', 5, 'balance'])
    assert.equal(results[0].transfer.email, 'group@example.com')
    assert.match(results[0].transfer.transfer_uid, /^[0-9a-f]{32}$/)
    // Readable one by one afterwards, as single transfers are.
    const b1 = (await partnerGet(t, '/companies/transfer/b-1', keys.read)).json()
    assert.equal(b1.transfer_uid, results[0].transfer.transfer_uid)
    assert.equal(b1.balance, 10.5)
    assert.equal((await partnerGet(t, '/companies/transfer/b-4', keys.read)).statusCode, 404)
    // The two transfers to one address share one holder link and one pending e-mail.
    const links = await t.db.db
      .selectFrom('transfers')
      .select('link_id')
      .where('company_ticket_id', 'in', ['b-1', 'b-2'])
      .execute()
    assert.equal(new Set(links.map((l) => l.link_id)).size, 1)
    const mails = await t.db.db
      .selectFrom('jobs')
      .select('id')
      .where('dedupe_key', '=', `transfer-mail:${links[0]!.link_id}`)
      .execute()
    assert.equal(mails.length, 1)
  })

  test('under one Idempotency-Key the batch is made once; a retry gets the same results', async () => {
    const body = [item('i-1'), item('i-2'), item('i-1')]
    const first = await batch(keys.write, body, { 'idempotency-key': 'batch-1' })
    assert.equal(first.statusCode, 200)
    const again = await batch(keys.write, body, { 'idempotency-key': 'batch-1' })
    assert.equal(again.statusCode, 200)
    assert.equal(again.headers['idempotent-replayed'], 'true')
    assert.deepEqual(
      again
        .json()
        .results.map((r: { status: number; transfer?: { transfer_uid: string } }) => [
          r.status,
          r.transfer?.transfer_uid,
        ]),
      first
        .json()
        .results.map((r: { status: number; transfer?: { transfer_uid: string } }) => [
          r.status,
          r.transfer?.transfer_uid,
        ]),
    )
    const rows = await t.db.db
      .selectFrom('transfers')
      .select('id')
      .where('company_ticket_id', 'in', ['i-1', 'i-2'])
      .execute()
    assert.equal(rows.length, 2)
    // Another body under the same key is refused.
    assert.equal((await batch(keys.write, [item('i-3')], { 'idempotency-key': 'batch-1' })).statusCode, 422)
  })

  test('concurrent batches with the same ids: each id is made exactly once', async () => {
    const ids = Array.from({ length: 20 }, (_, i) => `c-${i}`)
    const answers = await Promise.all(
      [0, 1, 2].map((n) =>
        batch(
          keys.write,
          (n === 1 ? [...ids].reverse() : ids).map((id) => item(id)),
        ),
      ),
    )
    const made = answers.flatMap((a) => {
      assert.equal(a.statusCode, 200, a.body)
      return a
        .json()
        .results.filter((r: { status: number }) => r.status === 201)
        .map((r: { company_ticket_id: string }) => r.company_ticket_id)
    })
    assert.deepEqual([...made].sort(), [...ids].sort())
  })

  test('the batch is refused whole: more than 500, empty, not a list, another event, a read-only key, no key', async () => {
    const many = Array.from({ length: 501 }, (_, i) => item(`m-${i}`))
    assert.equal((await batch(keys.write, many)).statusCode, 422)
    assert.equal((await batch(keys.write, [])).statusCode, 422)
    const notList = await partnerPost(t, '/companies/transfers', keys.write, {
      event_uid: EVENT,
      transfers: {},
    })
    assert.equal(notList.statusCode, 422)
    assert.deepEqual(notList.json().detail[0].loc, ['body', 'transfers'])
    const unknownField = await partnerPost(t, '/companies/transfers', keys.write, {
      event_uid: EVENT,
      transfers: [item('x')],
      extra: true,
    })
    assert.equal(unknownField.statusCode, 422)
    assert.equal((await batch(keys.read, [item('r-1')])).statusCode, 403)
    assert.equal((await batch(keys.other, [item('o-1')])).statusCode, 403)
    assert.equal(
      (
        await partnerPost(t, '/companies/transfers', undefined, {
          event_uid: EVENT,
          transfers: [item('n-1')],
        })
      ).statusCode,
      401,
    )
    const rows = await t.db.db
      .selectFrom('transfers')
      .select('id')
      .where('company_ticket_id', 'in', ['m-0', 'r-1', 'o-1', 'n-1', 'x'])
      .execute()
    assert.equal(rows.length, 0)
    // 500 is accepted.
    const full = await batch(
      keys.write,
      Array.from({ length: 500 }, (_, i) => item(`f-${i}`)),
    )
    assert.equal(full.statusCode, 200)
    assert.equal(full.json().results.filter((r: { status: number }) => r.status === 201).length, 500)
  })
})
