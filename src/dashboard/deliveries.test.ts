import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { dashboardSession, formToken } from '../../test/helpers/dashboard.js'
import {
  newTicketType,
  newTransfer,
  ownerOf,
  type PartnerKeys,
  registerReceiver,
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
          // Bound to the partners of the keys (seedPartner); acme-dash to none, stray to no partner of event 1.
          { username: 'partner1', password: 's3cret-pass', event_ids: [1], partner: 'Acme' },
          { username: 'partner2', password: 's3cret-pass', event_ids: [2], partner: 'Other' },
          { username: 'acme-dash', password: 's3cret-pass', event_ids: [1] },
          { username: 'stray', password: 's3cret-pass', event_ids: [1], partner: 'Nobody' },
        ],
      })
      // The receiver fails the first attempt with a body the page shows an excerpt of.
      receiver = await startReceiver([{ status: 503, body: 'upstream unavailable: try later' }])
      await registerReceiver(t, keys.write, receiver.url)
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

    test("the page is per partner: an administrator's tab of another partner shows none of these deliveries", async () => {
      const session = await dashboardSession(t, 'root@example.com')
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

    describe("another partner's deliveries (partners are isolated, own audit F3)", () => {
      let rivalReceiver: Receiver
      let rivalDelivery: number
      let rivalId: number
      let acmeId: number
      const RIVAL_TICKET = 'RIVAL-SECRET-1'
      const deliveryRow = (id: number) =>
        t.db.db
          .selectFrom('webhook_deliveries')
          .select(['status', 'attempts'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow()
      const deniedFor = (id: number) =>
        t.db.db
          .selectFrom('audit_log')
          .select(['actor', 'detail'])
          .where('kind', '=', 'webhook_resend')
          .where('outcome', '=', 'denied')
          .execute()
          .then((rows) => rows.filter((r) => JSON.parse(String(r.detail)).delivery_id === id))

      before(async () => {
        rivalId = (await ownerOf(t, keys.rival)).partnerId
        acmeId = (await ownerOf(t, keys.write)).partnerId
        rivalReceiver = await startReceiver()
        await registerReceiver(t, keys.rival, rivalReceiver.url)
        const type = await newTicketType(t, keys.rival)
        const transfer = await newTransfer(t, keys.rival, type, { company_ticket_id: RIVAL_TICKET })
        const scanner = (await login(t, 'op@example.com', 'operator')).access_token
        const use = await t.request({
          method: 'POST',
          url: `/tickets/${transfer.transfer_uid}/use`,
          token: scanner,
        })
        assert.equal(use.statusCode, 200, use.body)
        rivalDelivery = (
          await t.db.db
            .selectFrom('webhook_deliveries')
            .select('id')
            .where('partner_id', '=', rivalId)
            .executeTakeFirstOrThrow()
        ).id
        await until('the rival delivery to be delivered', async () => {
          const d = await deliveryRow(rivalDelivery)
          return d.status === 'delivered' && Number(d.attempts) === 1
        })
      })
      after(() => rivalReceiver.close())

      const notShown = (body: string) => {
        assert.ok(!body.includes(rivalReceiver.url), "the rival's receiver URL is shown")
        assert.ok(!body.includes(RIVAL_TICKET), "the rival's company_ticket_id is shown")
        assert.doesNotMatch(body, new RegExp(`data-delivery="${rivalDelivery}"`))
      }

      test("a dashboard user of the event (bound or not) neither reads nor resends the rival's deliveries", async () => {
        for (const who of ['partner1', 'acme-dash', 'stray']) {
          const session = await dashboardSession(t, who)
          const named = await page(session, `?partner=${rivalId}`)
          // Bound to Acme: the rival is not a partner it may see. Not bound (to one of the event): the notice.
          assert.equal(named.statusCode, who === 'partner1' ? 404 : 200, who)
          notShown(named.body)
          notShown((await page(session)).body)
          const res = await resend(session, rivalDelivery, formToken((await page(session)).body))
          assert.equal(res.statusCode, 404, who)
          const denied = await deniedFor(rivalDelivery)
          assert.equal(JSON.parse(String(denied.at(-1)!.detail)).reason, 'unknown_delivery', who)
          assert.match(String(denied.at(-1)!.actor), /^dashboard_user:\d+$/)
        }
        assert.equal((await deniedFor(rivalDelivery)).length, 3)
        // Nothing was scheduled again: a resend marks the delivery pending before it answers.
        assert.deepEqual(await deliveryRow(rivalDelivery), { status: 'delivered', attempts: 1 })
      })

      test("the event's figures show a dashboard user its own partner's receiver only", async () => {
        const figures = async (who: string) => {
          const res = await t.request({
            method: 'GET',
            url: '/dashboard/api/events/1/stats',
            cookies: { wb_session: await dashboardSession(t, who) },
          })
          assert.equal(res.statusCode, 200, res.body)
          return res.json().webhook
        }
        // Acme's receiver was removed above: the event's one receiver is the rival's, which is what the
        // figures used to show to every dashboard user of the event.
        const staff = await figures('root@example.com')
        assert.equal(staff.url, rivalReceiver.url)
        for (const who of ['partner1', 'acme-dash', 'stray']) {
          const shown = await figures(who)
          assert.equal(shown.configured, false, who)
          assert.equal(shown.url, null, who)
        }
        // The counts: a user bound to a partner sees its partner's (docs/dashboard.md), one bound to no
        // partner the event's, one bound to a name the event has no partner of none.
        const acmeDelivered = await t.db.db
          .selectFrom('webhook_deliveries')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('partner_id', '=', acmeId)
          .where('status', '=', 'delivered')
          .executeTakeFirstOrThrow()
        assert.equal((await figures('partner1')).delivered, Number(acmeDelivered.n), "the partner's count")
        assert.equal((await figures('acme-dash')).delivered, staff.delivered, "the event's count")
        assert.equal((await figures('stray')).delivered, 0)
        // Bound to no partner of the event: no partner's last error either.
        for (const who of ['acme-dash', 'stray']) assert.equal((await figures(who)).last_error, null, who)
      })

      test('a dashboard user bound to a partner sees that partner only, in the selector too', async () => {
        const session = await dashboardSession(t, 'partner1')
        for (const res of [await page(session), await page(session, `?partner=${acmeId}`)]) {
          assert.equal(res.statusCode, 200)
          assert.match(res.body, new RegExp(`data-delivery="${deliveryId}"`))
          assert.match(res.body, /Partner Acme/)
          assert.doesNotMatch(res.body, /Rival/)
          assert.doesNotMatch(res.body, /data-unbound/)
        }
      })

      test('a dashboard user bound to no partner of the event sees a notice, no receiver, no deliveries, no Resend', async () => {
        const unbound = await page(await dashboardSession(t, 'acme-dash'))
        assert.equal(unbound.statusCode, 200)
        assert.match(unbound.body, /This account is not bound to a partner of this event/)
        assert.match(unbound.body, /An administrator can set the account's partner/)
        const stray = await page(await dashboardSession(t, 'stray'))
        assert.equal(stray.statusCode, 200)
        assert.match(stray.body, /bound to the partner “Nobody”, which is not a partner of this event/)
        for (const body of [unbound.body, stray.body]) {
          assert.doesNotMatch(body, /data-delivery=/)
          assert.doesNotMatch(body, />Resend</)
          assert.doesNotMatch(body, /Receiver <code>/)
          assert.doesNotMatch(body, /Acme|Rival/)
        }
        const session = await dashboardSession(t, 'acme-dash')
        const res = await resend(session, deliveryId, formToken((await page(session)).body))
        assert.equal(res.statusCode, 404)
      })

      test('administrators and network managers see and resend every partner of their events', async () => {
        for (const who of ['root@example.com', 'ev1@example.com', 'nm@example.com']) {
          const session = await dashboardSession(t, who)
          const first = await page(session)
          assert.match(first.body, /aria-label="Partner"[\s\S]*Acme[\s\S]*Rival/, who)
          const rival = await page(session, `?partner=${rivalId}`)
          assert.equal(rival.statusCode, 200, who)
          assert.ok(rival.body.includes(rivalReceiver.url), who)
          assert.ok(rival.body.includes(RIVAL_TICKET), who)
          assert.match(rival.body, new RegExp(`data-delivery="${rivalDelivery}"`))
        }
        const session = await dashboardSession(t, 'nm@example.com')
        const res = await resend(session, rivalDelivery, formToken((await page(session)).body))
        assert.equal(res.statusCode, 303)
        assert.match(
          String(res.headers.location),
          new RegExp(`\\?partner=${rivalId}&resent=${rivalDelivery}$`),
        )
        await until('the resent attempt', async () => rivalReceiver.log.length === 2)
      })

      test('a new binding (PATCH) applies to an open session at once; null unbinds', async () => {
        const root = (await login(t, 'root@example.com')).access_token
        const [user] = (await t.request({ method: 'GET', url: '/admin/dashboard-users', token: root }))
          .json()
          .filter((u: { username: string }) => u.username === 'acme-dash')
        const bind = (partner: string | null) =>
          t.request({
            method: 'PATCH',
            url: `/admin/dashboard-users/${user.id}`,
            token: root,
            payload: { partner },
          })
        const session = await dashboardSession(t, 'acme-dash')
        assert.equal((await page(session, `?partner=${rivalId}`)).statusCode, 200)
        assert.equal((await bind('Rival')).json().partner, 'Rival')
        const bound = await page(session)
        assert.ok(bound.body.includes(rivalReceiver.url))
        assert.match(bound.body, new RegExp(`data-delivery="${rivalDelivery}"`))
        assert.doesNotMatch(bound.body, new RegExp(`data-delivery="${deliveryId}"`))
        assert.equal((await page(session, `?partner=${acmeId}`)).statusCode, 404)
        assert.equal((await bind(null)).json().partner, null)
        const unbound = await page(session)
        assert.match(unbound.body, /not bound to a partner of this event/)
        notShown(unbound.body)
      })
    })
  },
  { WEBHOOK_ALLOW_PRIVATE: 'true', JOBS_POLL_MS: '20', WEBHOOK_RETRY_SCHEDULE: '600,600,600' },
)
