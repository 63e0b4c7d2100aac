import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { dashboardSession, formToken } from '../../test/helpers/dashboard.js'
import {
  newTicketType,
  newTransfer,
  ownerOf,
  type PartnerKeys,
  seedPartner,
} from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { until } from '../../test/helpers/until.js'

const FORM = { 'content-type': 'application/x-www-form-urlencoded' }

forEachBackend(
  httpBackends,
  'dashboard: webhook deliveries page',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let receiver: Receiver
    let deliveryId: number

    const page = (session: string, query = '', event = 1) =>
      t.request({
        method: 'GET',
        url: `/dashboard/events/${event}/webhooks${query}`,
        cookies: { wb_session: session },
      })
    const resend = (session: string, id: number, csrf: string | undefined, event = 1) =>
      t.request({
        method: 'POST',
        url: `/dashboard/events/${event}/webhooks/deliveries/${id}/resend`,
        headers: FORM,
        cookies: { wb_session: session },
        payload: csrf === undefined ? '' : new URLSearchParams({ csrf_token: csrf }).toString(),
      })
    const attemptsOf = async (id: number) =>
      Number(
        (
          await t.db.db
            .selectFrom('webhook_deliveries')
            .select('attempts')
            .where('id', '=', id)
            .executeTakeFirstOrThrow()
        ).attempts,
      )
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      await t.seed({
        dashboard_users: [
          { username: 'partner1', password: 's3cret-pass', event_ids: [1] },
          { username: 'partner2', password: 's3cret-pass', event_ids: [2] },
        ],
      })
      // The receiver fails the first attempt with a body the page shows an excerpt of.
      receiver = await startReceiver([{ status: 503, body: 'upstream unavailable: try later' }])
      const put = await t.request({
        method: 'PUT',
        url: '/companies/webhook',
        headers: { api_key: keys.write },
        payload: { url: receiver.url },
      })
      assert.equal(put.statusCode, 200, put.body)
      const transfer = await newTransfer(t, keys.write, await newTicketType(t, keys.write))
      const scanner = (await login(t, 'op@example.com', 'operator')).access_token
      const use = await t.request({
        method: 'POST',
        url: `/tickets/${transfer.transfer_uid}/use`,
        token: scanner,
      })
      assert.equal(use.statusCode, 200, use.body)
      await until('the first attempt', async () => receiver.log.length === 1)
      const row = await t.db.db.selectFrom('webhook_deliveries').select('id').executeTakeFirstOrThrow()
      deliveryId = row.id
      await until('the attempt to be recorded', async () => (await attemptsOf(deliveryId)) === 1)
    })
    after(() => receiver.close())

    test('lists each delivery with its event, status, attempts (time, HTTP status, excerpt) and next retry', async () => {
      const res = await page(await dashboardSession(t, 'partner1'))
      assert.equal(res.statusCode, 200)
      assert.match(String(res.headers['content-security-policy']), /default-src 'none'/)
      const row = new RegExp(
        `<tr data-delivery="${deliveryId}" data-status="pending">([\\s\\S]*?)</tr>`,
      ).exec(res.body)
      assert.ok(row, res.body)
      const cells = row[1]!
      assert.match(cells, /Ticket used/)
      assert.match(cells, /HTTP 503/)
      assert.match(cells, /upstream unavailable: try later/)
      assert.match(cells, /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/)
      assert.match(cells, />Resend</)
      assert.match(res.body, new RegExp(receiver.url.replaceAll('/', '\\/')))
    })

    test('the status filter shows only deliveries of that status', async () => {
      const session = await dashboardSession(t, 'partner1')
      const pending = await page(session, '?status=pending')
      assert.match(pending.body, new RegExp(`data-delivery="${deliveryId}"`))
      const delivered = await page(session, '?status=delivered')
      assert.equal(delivered.statusCode, 200)
      assert.doesNotMatch(delivered.body, /data-delivery=/)
      assert.match(delivered.body, /No deliveries with status delivered/)
      assert.equal((await page(session, '?status=bogus')).statusCode, 422)
    })

    test("the event's administrators and network managers see it; another event's users do not", async () => {
      for (const who of ['ev1@example.com', 'nm@example.com', 'root@example.com'])
        assert.equal((await page(await dashboardSession(t, who))).statusCode, 200, who)
      const other = await dashboardSession(t, 'partner2')
      assert.equal((await page(other)).statusCode, 403)
      assert.equal((await page(other, '', 2)).statusCode, 200)
      const anonymous = await t.request({ method: 'GET', url: '/dashboard/events/1/webhooks' })
      assert.equal(anonymous.statusCode, 303)
      assert.equal(anonymous.headers.location, '/dashboard/login')
    })

    test('Resend without the CSRF token, or by a user of another event, is refused, audited, and sends nothing', async () => {
      const session = await dashboardSession(t, 'partner1')
      const before = receiver.log.length
      assert.equal((await resend(session, deliveryId, undefined)).statusCode, 403)
      assert.equal((await resend(session, deliveryId, 'wrong-token')).statusCode, 403)
      const other = await dashboardSession(t, 'partner2')
      const otherToken = formToken((await page(other, '', 2)).body)
      assert.equal((await resend(other, deliveryId, otherToken)).statusCode, 403)
      const denied = await t.db.db
        .selectFrom('audit_log')
        .selectAll()
        .where('kind', '=', 'webhook_resend')
        .where('outcome', '=', 'denied')
        .execute()
      assert.equal(denied.length, 3)
      const job = await t.db.db
        .selectFrom('jobs')
        .select('run_at')
        .where('dedupe_key', '=', `webhook:${deliveryId}`)
        .executeTakeFirstOrThrow()
      assert.ok(Number(job.run_at) > t.clock.now(), 'the retry is still scheduled for later')
      assert.equal(receiver.log.length, before)
    })

    test('Resend sends the delivery again now with the same webhook-id, audited', async () => {
      const session = await dashboardSession(t, 'partner1')
      const token = formToken((await page(session)).body)
      const res = await resend(session, deliveryId, token)
      assert.equal(res.statusCode, 303)
      assert.match(
        String(res.headers.location),
        new RegExp(`^/dashboard/events/1/webhooks\\?partner=\\d+&resent=${deliveryId}$`),
      )
      await until('the resent attempt', async () => receiver.log.length === 2)
      assert.equal(receiver.log[1]!.headers['webhook-id'], receiver.log[0]!.headers['webhook-id'])
      await until('the delivery to be delivered', async () => (await attemptsOf(deliveryId)) === 2)
      const shown = await page(session, `?resent=${deliveryId}`)
      assert.match(shown.body, new RegExp(`Delivery #${deliveryId} is being sent again`))
      assert.match(shown.body, /HTTP 200/)
      const audit = await t.db.db
        .selectFrom('audit_log')
        .selectAll()
        .where('kind', '=', 'webhook_resend')
        .where('outcome', '=', 'success')
        .executeTakeFirstOrThrow()
      assert.match(String(audit.actor), /^dashboard_user:\d+$/)
      assert.match(String(audit.detail), new RegExp(`"delivery_id":${deliveryId}`))
    })

    test("the page is per partner: another partner's tab shows none of these deliveries", async () => {
      const session = await dashboardSession(t, 'partner1')
      const { partnerId } = await ownerOf(t, keys.rival)
      const rival = await page(session, `?partner=${partnerId}`)
      assert.equal(rival.statusCode, 200)
      assert.doesNotMatch(rival.body, new RegExp(`data-delivery="${deliveryId}"`))
      assert.match(rival.body, /No receiver is registered/)
      assert.match((await page(session)).body, new RegExp(`data-delivery="${deliveryId}"`))
      // A partner of another event is not found.
      const other = await ownerOf(t, keys.other)
      assert.equal((await page(session, `?partner=${other.partnerId}`)).statusCode, 404)
    })

    test('with the receiver removed, Resend answers 409 and says why', async () => {
      const del = await t.request({
        method: 'DELETE',
        url: '/companies/webhook',
        headers: { api_key: keys.write },
      })
      assert.equal(del.statusCode, 200)
      const session = await dashboardSession(t, 'partner1')
      const body = (await page(session)).body
      assert.doesNotMatch(body, />Resend</)
      const res = await resend(session, deliveryId, formToken(body))
      assert.equal(res.statusCode, 409)
      assert.match(res.body, /must register it again/)
      assert.equal((await resend(session, 999_999, formToken(body))).statusCode, 404)
    })
  },
  { WEBHOOK_ALLOW_PRIVATE: 'true', JOBS_POLL_MS: '20', WEBHOOK_RETRY_SCHEDULE: '600,600,600' },
)
