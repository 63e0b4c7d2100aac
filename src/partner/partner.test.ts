import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  newTicketType,
  type PartnerKeys,
  partnerGet,
  partnerPost,
  revokeKeyAsAdmin,
  seedPartner,
} from '../../test/helpers/partner.js'
import { sha256Hex } from '../platform/digest.js'

const EVENT = 'summer-fest-2026'
const ticket = (over: Record<string, unknown> = {}) => ({
  event_uid: EVENT,
  name: 'Weekend pass',
  price: 19.99,
  ticket_date: '2026-07-18T20:00:00.000',
  ...over,
})

forEachBackend(httpBackends, 'partner API', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
  })

  test('a missing, unknown or revoked api_key is 401, before the body is looked at', async () => {
    const missing = await partnerPost(t, '/companies/ticket', undefined, { junk: true })
    assert.equal(missing.statusCode, 401)
    assert.equal(missing.headers['www-authenticate'], 'Bearer')
    assert.ok(missing.json().detail)
    for (const [method, url] of [
      ['GET', '/companies/tickets'],
      ['GET', '/companies/transfer/x'],
      ['GET', '/companies/webhook'],
      ['PUT', '/companies/webhook'],
      ['DELETE', '/companies/webhook'],
      ['GET', '/companies/webhook/deliveries'],
      ['POST', '/companies/webhook/deliveries/1/retry'],
      ['POST', '/companies/transfer'],
    ] as const)
      assert.equal((await t.request({ method, url })).statusCode, 401, `${method} ${url}`)
    const unknown = await partnerPost(t, '/companies/ticket', 'wb_not-a-key', ticket())
    assert.equal(unknown.statusCode, 401)
    const row = await t.db.db
      .selectFrom('event_clients')
      .select('id')
      .where('token_hash', '=', sha256Hex(keys.read))
      .executeTakeFirstOrThrow()
    const { createApiKey } = await import('../api-keys/api-keys.store.js')
    const doomed = await createApiKey(t.db.db, {
      event_id: 1,
      name: 'doomed',
      scopes: ['api:write'],
      created_by: null,
      now: t.clock.now(),
    })
    assert.equal((await partnerPost(t, '/companies/ticket', doomed.plaintext, ticket())).statusCode, 201)
    // Revoked as an administrator does: the key, in this instance's key cache now, is refused at once.
    await revokeKeyAsAdmin(t, doomed.record.id)
    assert.equal((await partnerPost(t, '/companies/ticket', doomed.plaintext, ticket())).statusCode, 401)
    assert.ok(row.id)
  })

  test('a key without api:write cannot create; a foreign event_uid is 403; 422 comes before 403', async () => {
    const readOnly = await partnerPost(t, '/companies/ticket', keys.read, ticket())
    assert.equal(readOnly.statusCode, 403)
    const foreign = await partnerPost(
      t,
      '/companies/ticket',
      keys.write,
      ticket({ event_uid: 'winter-fest-2026' }),
    )
    assert.equal(foreign.statusCode, 403)
    const foreignTransfer = await partnerPost(t, '/companies/transfer', keys.other, {
      event_uid: EVENT,
      email: 'a@example.com',
      ticket_uid: 'a'.repeat(32),
      company_ticket_id: 'x',
    })
    assert.equal(foreignTransfer.statusCode, 403)
    const invalidAndReadOnly = await partnerPost(t, '/companies/ticket', keys.read, ticket({ price: 1.234 }))
    assert.equal(invalidAndReadOnly.statusCode, 422)
    assert.equal((await partnerGet(t, '/companies/tickets', keys.read)).statusCode, 200)
    assert.equal(
      (await partnerGet(t, `/companies/tickets?event_uid=winter-fest-2026`, keys.read)).statusCode,
      403,
    )
  })

  test('POST /companies/ticket answers 201 with a 32-hex ticket_uid and keeps the price exact', async () => {
    for (const price of [19.99, 0.07, 1000000.01, 0, 5, 0.1]) {
      const res = await partnerPost(t, '/companies/ticket', keys.write, ticket({ price }))
      assert.equal(res.statusCode, 201, res.body)
      const body = res.json()
      assert.match(body.ticket_uid, /^[0-9a-f]{32}$/)
      assert.deepEqual(Object.keys(body).sort(), [
        'created_at',
        'event_timezone',
        'event_uid',
        'name',
        'price',
        'ticket_date',
        'ticket_uid',
      ])
      assert.equal(body.price, price)
      assert.equal(body.event_uid, EVENT)
      assert.equal(body.event_timezone, 'Europe/Berlin')
      assert.equal(body.ticket_date, '2026-07-18T20:00:00.000')
      const stored = await t.db.db
        .selectFrom('ticket_types')
        .select('price')
        .where('uid', '=', body.ticket_uid)
        .executeTakeFirstOrThrow()
      assert.equal(Number(stored.price), Math.round(price * 100))
    }
    const list = (await partnerGet(t, '/companies/tickets', keys.write)).json()
    assert.ok(list.tickets.some((x: { price: number }) => x.price === 1000000.01))
    const other = (await partnerGet(t, '/companies/tickets', keys.other)).json()
    assert.equal(other.tickets.length, 0, 'another event sees this event’s ticket types')
  })

  test('POST /companies/ticket validates every field', async () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [ticket({ price: 1.005 }), 'price', 'value_error'],
      [ticket({ price: 19.999 }), 'price', 'value_error'],
      [ticket({ price: -1 }), 'price', 'greater_than_equal'],
      [ticket({ price: '19.99' }), 'price', 'float_parsing'],
      [ticket({ ticket_date: '2026-07-18T20:00:00' }), 'ticket_date', 'string_pattern_mismatch'],
      [ticket({ ticket_date: '2026-07-18T20:00:00.000Z' }), 'ticket_date', 'string_pattern_mismatch'],
      [ticket({ ticket_date: '2026-07-18 20:00:00.000' }), 'ticket_date', 'string_pattern_mismatch'],
      [ticket({ ticket_date: '2026-02-30T20:00:00.000' }), 'ticket_date', 'value_error'],
      [ticket({ ticket_date: '2026-07-18T24:00:00.000' }), 'ticket_date', 'value_error'],
      [ticket({ name: '' }), 'name', 'string_too_short'],
      [ticket({ name: 'x'.repeat(201) }), 'name', 'string_too_long'],
      [ticket({ extra: 1 }), 'extra', 'extra_forbidden'],
      [{ event_uid: EVENT, price: 1, ticket_date: '2026-07-18T20:00:00.000' }, 'name', 'missing'],
    ]
    for (const [payload, field, type] of cases) {
      const res = await partnerPost(t, '/companies/ticket', keys.write, payload)
      assert.equal(res.statusCode, 422, `${JSON.stringify(payload)}: ${res.body}`)
      const issue = res.json().detail.find((d: { loc: string[] }) => d.loc[1] === field)
      assert.ok(issue, `no issue for ${field}: ${res.body}`)
      assert.equal(issue.type, type)
      assert.equal(issue.loc[0], 'body')
    }
  })

  test('Idempotency-Key: a retry gets the first answer; another body with the same key is 422', async () => {
    const headers = { 'idempotency-key': 'create-weekend-1' }
    const first = await partnerPost(t, '/companies/ticket', keys.write, ticket({ name: 'Idem' }), headers)
    assert.equal(first.statusCode, 201)
    const again = await partnerPost(t, '/companies/ticket', keys.write, ticket({ name: 'Idem' }), headers)
    assert.equal(again.statusCode, 201)
    assert.equal(again.headers['idempotent-replayed'], 'true')
    assert.deepEqual(again.json(), first.json())
    const count = await t.db.db
      .selectFrom('ticket_types')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('name', '=', 'Idem')
      .executeTakeFirstOrThrow()
    assert.equal(Number(count.n), 1)
    const changed = await partnerPost(t, '/companies/ticket', keys.write, ticket({ name: 'Idem 2' }), headers)
    assert.equal(changed.statusCode, 422)
    assert.deepEqual(changed.json().detail[0].loc, ['header', 'idempotency-key'])
    // Keys belong to one API key: another partner's identical key is a separate request.
    const other = await partnerPost(
      t,
      '/companies/ticket',
      keys.other,
      ticket({ name: 'Idem', event_uid: 'winter-fest-2026' }),
      headers,
    )
    assert.equal(other.statusCode, 201)
    assert.notEqual(other.json().ticket_uid, first.json().ticket_uid)
    // A reservation whose request died (no answer stored) is taken over after a minute.
    const keyId = (
      await t.db.db
        .selectFrom('event_clients')
        .select('id')
        .where('token_hash', '=', sha256Hex(keys.write))
        .executeTakeFirstOrThrow()
    ).id
    const body = ticket({ name: 'After crash' })
    const h = { 'idempotency-key': 'crashed-2' }
    const firstTry = await partnerPost(t, '/companies/ticket', keys.write, body, h)
    assert.equal(firstTry.statusCode, 201)
    await t.db.db
      .updateTable('idempotency_keys')
      .set({ status_code: null, response: null })
      .where('api_key_id', '=', keyId)
      .where('key', '=', 'crashed-2')
      .execute()
    const inFlight = await partnerPost(t, '/companies/ticket', keys.write, body, h)
    assert.equal(inFlight.statusCode, 409)
    assert.equal(inFlight.json().error, 'idempotency_key_in_use')
    t.clock.advance(61_000)
    const takenOver = await partnerPost(t, '/companies/ticket', keys.write, body, h)
    assert.equal(takenOver.statusCode, 201)
    assert.equal(takenOver.headers['idempotent-replayed'], undefined)
    // Kept 24 hours: afterwards the key starts afresh.
    t.clock.advance(24 * 3600_000 + 1000)
    const later = await partnerPost(t, '/companies/ticket', keys.write, ticket({ name: 'Idem 2' }), headers)
    assert.equal(later.statusCode, 201)
  })

  test('Idempotency-Key on transfers replays the 201 instead of answering 409', async () => {
    const ticketUid = await newTicketType(t, keys.write)
    const body = {
      event_uid: EVENT,
      email: 'idem@example.com',
      ticket_uid: ticketUid,
      company_ticket_id: 'idem-transfer-1',
    }
    const headers = { 'idempotency-key': 'transfer-1' }
    const first = await partnerPost(t, '/companies/transfer', keys.write, body, headers)
    assert.equal(first.statusCode, 201)
    const retry = await partnerPost(t, '/companies/transfer', keys.write, body, headers)
    assert.equal(retry.statusCode, 201)
    assert.deepEqual(retry.json(), first.json())
    const noKey = await partnerPost(t, '/companies/transfer', keys.write, body)
    assert.equal(noKey.statusCode, 409)
    // Concurrent requests with one key: one runs, none creates a second record.
    const burst = await Promise.all(
      Array.from({ length: 5 }, () =>
        partnerPost(
          t,
          '/companies/transfer',
          keys.write,
          { ...body, company_ticket_id: 'idem-2' },
          {
            'idempotency-key': 'transfer-2',
          },
        ),
      ),
    )
    for (const r of burst) assert.ok([201, 409].includes(r.statusCode), r.body)
    assert.ok(burst.some((r) => r.statusCode === 201))
    const n = await t.db.db
      .selectFrom('transfers')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('company_ticket_id', '=', 'idem-2')
      .executeTakeFirstOrThrow()
    assert.equal(Number(n.n), 1)
  })

  test('POST /companies/transfer: 201, money kept exactly, readable back by company_ticket_id', async () => {
    const ticketUid = await newTicketType(t, keys.write)
    const res = await partnerPost(t, '/companies/transfer', keys.write, {
      event_uid: EVENT,
      email: 'Money@Example.com',
      ticket_uid: ticketUid,
      company_ticket_id: 'money-1',
      balance: 1000000.01,
      promo_balance: 0.07,
      additional_info: { access_gate: 'North', seat_number: 'A-12' },
    })
    assert.equal(res.statusCode, 201, res.body)
    const body = res.json()
    assert.deepEqual(Object.keys(body).sort(), [
      'company_ticket_id',
      'created_at',
      'email',
      'event_timezone',
      'status',
      'ticket_code',
      'ticket_uid',
      'transfer_uid',
    ])
    assert.match(body.transfer_uid, /^[0-9a-f]{32}$/)
    assert.equal(body.status, 'TRANSFERRED')
    assert.equal(body.ticket_uid, ticketUid)
    const row = await t.db.db
      .selectFrom('transfers')
      .select(['balance', 'promo_balance'])
      .where('uid', '=', body.transfer_uid)
      .executeTakeFirstOrThrow()
    assert.equal(Number(row.balance), 100000001)
    assert.equal(Number(row.promo_balance), 7)
    const back = await partnerGet(t, '/companies/transfer/money-1', keys.read)
    assert.equal(back.statusCode, 200)
    assert.equal(back.json().balance, 1000000.01)
    assert.equal(back.json().promo_balance, 0.07)
    assert.deepEqual(back.json().additional_info, { access_gate: 'North', seat_number: 'A-12' })
    assert.equal(back.json().status, 'TRANSFERRED')
    assert.equal((await partnerGet(t, '/companies/transfer/money-1', keys.other)).statusCode, 404)
    assert.equal((await partnerGet(t, '/companies/transfer/nope', keys.write)).statusCode, 404)
    const defaults = await partnerPost(t, '/companies/transfer', keys.write, {
      event_uid: EVENT,
      email: 'defaults@example.com',
      ticket_uid: ticketUid,
      company_ticket_id: 'money-2',
    })
    assert.equal(defaults.statusCode, 201)
    assert.equal((await partnerGet(t, '/companies/transfer/money-2', keys.write)).json().balance, 0)
  })

  test('transfer validation: amounts, company_ticket_id length, unknown ticket_uid 404', async () => {
    const ticketUid = await newTicketType(t, keys.write)
    const base = { event_uid: EVENT, email: 'v@example.com', ticket_uid: ticketUid, company_ticket_id: 'v-1' }
    const bad: [Record<string, unknown>, string][] = [
      [{ ...base, balance: 0.001 }, 'balance'],
      [{ ...base, promo_balance: 2.555 }, 'promo_balance'],
      [{ ...base, balance: -0.01 }, 'balance'],
      [{ ...base, company_ticket_id: '' }, 'company_ticket_id'],
      [{ ...base, company_ticket_id: 'x'.repeat(101) }, 'company_ticket_id'],
      [{ ...base, ticket_uid: 'ABC' }, 'ticket_uid'],
      [{ ...base, email: 'not-an-address' }, 'email'],
      [{ ...base, additional_info: { colour: 'red' } }, 'additional_info'],
    ]
    for (const [payload, field] of bad) {
      const res = await partnerPost(t, '/companies/transfer', keys.write, payload)
      assert.equal(res.statusCode, 422, `${field}: ${res.body}`)
      assert.equal(res.json().detail[0].loc[1], field)
    }
    const unknown = await partnerPost(t, '/companies/transfer', keys.write, {
      ...base,
      ticket_uid: 'f'.repeat(32),
    })
    assert.equal(unknown.statusCode, 404)
    const otherEventsType = await newTicketType(t, keys.other, 'winter-fest-2026')
    const foreignType = await partnerPost(t, '/companies/transfer', keys.write, {
      ...base,
      ticket_uid: otherEventsType,
    })
    assert.equal(foreignType.statusCode, 404)
  })

  test('a used company_ticket_id is 409 duplicate_company_ticket_id, per event', async () => {
    const ticketUid = await newTicketType(t, keys.write)
    const body = {
      event_uid: EVENT,
      email: 'd@example.com',
      ticket_uid: ticketUid,
      company_ticket_id: 'dup-1',
    }
    assert.equal((await partnerPost(t, '/companies/transfer', keys.write, body)).statusCode, 201)
    const dup = await partnerPost(t, '/companies/transfer', keys.write, {
      ...body,
      email: 'other@example.com',
    })
    assert.equal(dup.statusCode, 409)
    assert.deepEqual(Object.keys(dup.json()).sort(), ['detail', 'error'])
    assert.equal(dup.json().error, 'duplicate_company_ticket_id')
    const otherType = await newTicketType(t, keys.other, 'winter-fest-2026')
    const sameIdOtherEvent = await partnerPost(t, '/companies/transfer', keys.other, {
      ...body,
      event_uid: 'winter-fest-2026',
      ticket_uid: otherType,
    })
    assert.equal(sameIdOtherEvent.statusCode, 201)
  })

  test('10 identical transfers at once: exactly one 201, nine 409', async () => {
    const ticketUid = await newTicketType(t, keys.write)
    const body = {
      event_uid: EVENT,
      email: 'race@example.com',
      ticket_uid: ticketUid,
      company_ticket_id: 'race-1',
    }
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => partnerPost(t, '/companies/transfer', keys.write, body)),
    )
    const codes = answers.map((r) => r.statusCode).sort()
    assert.deepEqual(codes, [201, 409, 409, 409, 409, 409, 409, 409, 409, 409])
    for (const r of answers.filter((a) => a.statusCode === 409))
      assert.equal(r.json().error, 'duplicate_company_ticket_id')
    const n = await t.db.db
      .selectFrom('transfers')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('company_ticket_id', '=', 'race-1')
      .executeTakeFirstOrThrow()
    assert.equal(Number(n.n), 1)
  })

  test('requests without a valid key are limited to 120 per minute per address, before the 401', async () => {
    const headers = { api_key: 'wb_not-a-key', 'x-forwarded-for': '198.51.100.77' }
    t.clock.freeze()
    try {
      const codes: number[] = []
      for (let i = 0; i < 120; i++)
        codes.push((await t.request({ method: 'GET', url: '/companies/tickets', headers })).statusCode)
      assert.deepEqual([...new Set(codes)], [401])
      const last = await t.request({ method: 'GET', url: '/companies/tickets', headers })
      assert.equal(last.statusCode, 429)
      assert.equal(last.json().limit, 120)
      assert.equal(last.headers['ratelimit-limit'], '120')
      // A valid key from the same address has its own budget.
      const valid = await t.request({
        method: 'GET',
        url: '/companies/tickets',
        headers: { ...headers, api_key: keys.read },
      })
      assert.equal(valid.statusCode, 200)
    } finally {
      t.clock.thaw()
    }
  })
})
