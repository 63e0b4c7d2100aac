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
