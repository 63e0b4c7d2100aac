// A refused Resend is recorded as `denied`, as docs/security.md says refusals are: the
// dashboard's form without its fields (400), another event's delivery (404), and the partner API's retry
// of another partner's delivery (404).
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { dashboardSession, formToken } from '../../test/helpers/dashboard.js'
import {
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerGet,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { waitFor } from '../../test/helpers/until.js'

forEachBackend(
  httpBackends,
  'refused Resends',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let receiver: Receiver
    /** A delivery of event 2's partner, and one of event 1's partner Acme. */
    let event2Delivery: number
    let acmeDelivery: number

    async function deliveryOf(key: string, eventUid: string, scanner: string) {
      await t.request({
        method: 'PUT',
        url: '/companies/webhook',
        headers: { api_key: key },
        payload: { url: receiver.url },
      })
      const transfer = await newTransfer(t, key, await newTicketType(t, key, eventUid), {}, eventUid)
      const used = await t.request({
        method: 'POST',
        url: `/tickets/${transfer.transfer_uid}/use`,
        token: scanner,
      })
      assert.equal(used.statusCode, 200, used.body)
      return waitFor<number>(
        async () => (await partnerGet(t, '/companies/webhook/deliveries', key)).json().deliveries[0]?.id,
        10_000,
        'the delivery',
      )
    }
    const denials = () =>
      t.db.db
        .selectFrom('audit_log')
        .select(['actor', 'detail'])
        .where('kind', '=', 'webhook_resend')
        .where('outcome', '=', 'denied')
        .orderBy('id')
        .execute()

    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      await t.seed({
        operators: [
          {
            email: 'op-both@example.com',
            password: 's3cret-pass',
            event_id: 2,
            mode: 0,
            permissions: { '2': ['ticket:scan'] },
          },
        ],
      })
      receiver = await startReceiver()
      acmeDelivery = await deliveryOf(
        keys.write,
        'summer-fest-2026',
        (await login(t, 'op@example.com', 'operator')).access_token,
      )
      event2Delivery = await deliveryOf(
        keys.other,
        'winter-fest-2026',
        (await login(t, 'op-both@example.com', 'operator')).access_token,
      )
    })

    after(() => receiver?.close())

    test('refused Resends are audited', async () => {
      const session = await dashboardSession(t, 'partner1')
      const page = await t.request({
        method: 'GET',
        url: '/dashboard/events/1/webhooks',
        cookies: { wb_session: session },
      })
      const csrf = formToken(page.body)
      const before = (await denials()).length
      const post = (url: string, payload: string | undefined, headers: Record<string, string> = {}) =>
        t.request({
          method: 'POST',
          url,
          cookies: { wb_session: session },
          headers,
          ...(payload !== undefined ? { payload } : {}),
        })

      // The form without its fields at all (no body): 422, recorded.
      const bare = await post(`/dashboard/events/1/webhooks/deliveries/${acmeDelivery}/resend`, undefined)
      assert.equal(bare.statusCode, 400, bare.body)
      // Another event's delivery, named under this event with a good CSRF token: 404, recorded.
      const form = { 'content-type': 'application/x-www-form-urlencoded' }
      const foreign = await post(
        `/dashboard/events/1/webhooks/deliveries/${event2Delivery}/resend`,
        new URLSearchParams({ csrf_token: csrf }).toString(),
        form,
      )
      assert.equal(foreign.statusCode, 404)
      // Another partner's delivery through the partner API: 404, recorded.
      const rival = await partnerPost(
        t,
        `/companies/webhook/deliveries/${acmeDelivery}/retry`,
        keys.rival,
        {},
      )
      assert.equal(rival.statusCode, 404)

      const rows = (await denials()).slice(before)
      assert.equal(rows.length, 3, JSON.stringify(rows))
      const reasons = rows.map((r) => JSON.parse(String(r.detail)).reason)
      assert.deepEqual(reasons, ['invalid_form', 'unknown_delivery', 'unknown_delivery'])
      assert.match(String(rows[0]!.actor), /^dashboard_user:\d+$/)
      assert.match(String(rows[2]!.actor), /^api_key:\d+$/)
      // Nothing was resent.
      for (const id of [acmeDelivery, event2Delivery]) {
        const d = await t.db.db
          .selectFrom('webhook_deliveries')
          .select('attempts')
          .where('id', '=', id)
          .executeTakeFirstOrThrow()
        assert.equal(Number(d.attempts), 1)
      }
    })
  },
  { WEBHOOK_ALLOW_PRIVATE: 'true', JOBS_POLL_MS: '20', WEBHOOK_RETRY_SCHEDULE: '600,600,600' },
)
