import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerGet,
  seedPartner,
} from '../../test/helpers/partner.js'

/** `used_at` (UTC) shown in the event's zone, in the form of used_timestamp. */
const local = (usedAt: string, zone: string) =>
  `${new Intl.DateTimeFormat('sv-SE', { timeZone: zone, dateStyle: 'short', timeStyle: 'medium' })
    .format(new Date(usedAt))
    .replace(' ', 'T')}.${usedAt.slice(20, 23)}`

/** Every answer with the event-local used_timestamp has used_at in UTC, and the zone is readable. */
forEachBackend(httpBackends, 'times a partner can trust', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
  })

  test('used_at (UTC, Z) is the instant of used_timestamp in the event time zone, in every answer', async () => {
    const types = (await partnerGet(t, '/companies/tickets', keys.read)).json().tickets
    const ticket = await newTicketType(t, keys.write)
    assert.ok(types.every((x: { event_timezone: string }) => x.event_timezone === 'Europe/Berlin'))
    const transfer = await newTransfer(t, keys.write, ticket)
    const before = (
      await partnerGet(t, `/companies/transfer/${transfer.company_ticket_id}`, keys.read)
    ).json()
    assert.equal(before.used_at, null)
    assert.equal(before.event_timezone, 'Europe/Berlin')

    const scanner = (await login(t, 'op@example.com', 'operator')).access_token
    const use = await t.request({
      method: 'POST',
      url: `/tickets/${transfer.transfer_uid}/use`,
      token: scanner,
    })
    assert.equal(use.statusCode, 200)
    const { used_timestamp, used_at } = use.json()
    assert.match(used_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    assert.equal(local(used_at, 'Europe/Berlin'), used_timestamp)

    const read = (await partnerGet(t, `/companies/transfer/${transfer.company_ticket_id}`, keys.read)).json()
    assert.equal(read.used_timestamp, used_timestamp)
    assert.equal(read.used_at, used_at)
    const again = await t.request({
      method: 'POST',
      url: `/tickets/${transfer.transfer_uid}/use`,
      token: scanner,
    })
    assert.equal(again.statusCode, 409)
    assert.equal(again.json().used_at, used_at)
    const reissue = await t.request({
      method: 'POST',
      url: `/companies/transfer/${transfer.company_ticket_id}/reissue`,
      headers: { api_key: keys.write },
    })
    assert.equal(reissue.statusCode, 409)
    assert.equal(reissue.json().used_at, used_at)
  })
})
