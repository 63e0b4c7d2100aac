// What two partner integrators tripped over when reading the contract: an empty JSON body where none
// is needed, an API key sent as a bearer token.
import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerGet,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'

forEachBackend(httpBackends, 'the partner contract as integrators read it', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  let ticketUid: string
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
    ticketUid = await newTicketType(t, keys.write)
  })

  test('a re-issue with Content-Type: application/json and an empty body is accepted (no body is needed)', async () => {
    const m = await newTransfer(t, keys.write, ticketUid)
    const res = await t.request({
      method: 'POST',
      url: `/companies/transfer/${m.company_ticket_id}/reissue`,
      headers: { api_key: keys.write, 'content-type': 'application/json' },
      payload: '',
    })
    assert.equal(res.statusCode, 200, res.body)
    assert.equal(res.json().code_version, 2)
  })

  test('an empty JSON body where a body is needed is reported missing (422), not a decode error', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/companies/transfer',
      headers: { api_key: keys.write, 'content-type': 'application/json' },
      payload: '',
    })
    assert.equal(res.statusCode, 422)
    assert.deepEqual(res.json().detail, [{ loc: ['body'], msg: 'Field required', type: 'missing' }])
  })

  test('the answer of POST /companies/transfer (and of a batch) has event_timezone, as the read has', async () => {
    const made = await partnerPost(t, '/companies/transfer', keys.write, {
      event_uid: 'summer-fest-2026',
      email: 'tz@example.com',
      ticket_uid: ticketUid,
      company_ticket_id: 'tz-1',
    })
    assert.equal(made.statusCode, 201, made.body)
    const read = await partnerGet(t, '/companies/transfer/tz-1', keys.read)
    assert.equal(made.json().event_timezone, 'Europe/Berlin')
    assert.equal(made.json().event_timezone, read.json().event_timezone)
    const batch = await partnerPost(t, '/companies/transfers', keys.write, {
      event_uid: 'summer-fest-2026',
      transfers: [{ email: 'tz@example.com', ticket_uid: ticketUid, company_ticket_id: 'tz-2' }],
    })
    assert.equal(batch.json().results[0].transfer.event_timezone, 'Europe/Berlin')
  })

  test('a replay of an Idempotency-Key record kept before answers had event_timezone answers it too', async () => {
    const body = {
      event_uid: 'summer-fest-2026',
      email: 'tz@example.com',
      ticket_uid: ticketUid,
      company_ticket_id: 'tz-3',
    }
    const headers = { 'idempotency-key': 'tz-replay' }
    assert.equal((await partnerPost(t, '/companies/transfer', keys.write, body, headers)).statusCode, 201)
    // The record as the previous release kept it: the answer without event_timezone.
    const row = await t.db.db
      .selectFrom('idempotency_keys')
      .select(['response'])
      .where('key', '=', 'tz-replay')
      .executeTakeFirstOrThrow()
    const { event_timezone, ...older } = JSON.parse(row.response!)
    assert.equal(event_timezone, 'Europe/Berlin')
    await t.db.db
      .updateTable('idempotency_keys')
      .set({ response: JSON.stringify(older) })
      .where('key', '=', 'tz-replay')
      .execute()
    const again = await partnerPost(t, '/companies/transfer', keys.write, body, headers)
    assert.equal(again.statusCode, 201, again.body)
    assert.equal(again.headers['idempotent-replayed'], 'true')
    assert.equal(again.json().event_timezone, 'Europe/Berlin')
  })

  test('an API key sent as Authorization: Bearer gets a 401 that says where partner keys go', async () => {
    const res = await partnerPost(
      t,
      '/companies/ticket',
      undefined,
      {},
      { authorization: `Bearer ${keys.write}` },
    )
    assert.equal(res.statusCode, 401)
    assert.match(res.json().detail, /api_key header/)
    assert.match(res.json().detail, /not in Authorization: Bearer/)
    assert.match(String(res.headers['www-authenticate']), /^Bearer/)
    const none = await partnerPost(t, '/companies/ticket', undefined, {})
    assert.equal(none.json().detail, 'Missing api_key header')
  })
})
