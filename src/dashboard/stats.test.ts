import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { ACTIVITY_ENV, type Activity, createActivity, EXPECTED } from '../../test/helpers/activity.js'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { dashboardSession } from '../../test/helpers/dashboard.js'
import { bucketStarts, zoneOffsetMs } from './stats.service.js'

forEachBackend(
  httpBackends,
  'event figures from partner activity',
  (ctx) => {
    let t: TestApp
    let activity: Activity
    let admin: string
    before(async () => {
      t = ctx()
      // The figures put "just now" uses in the last 5-minute (1h range) and hour (24h range) bucket:
      // start the activity well inside a 5-minute slot, so that a run crossing a slot boundary between
      // the uses and the reads (the clock follows the wall clock) cannot move them to another bucket.
      const slot = 300_000
      const left = slot - (t.clock.now() % slot)
      if (left < 90_000) t.clock.advance(left + 1000)
      activity = await createActivity(t)
      admin = (await login(t, 'ev1@example.com')).access_token
    })
    after(async () => {
      await activity?.receiver.close()
    })

    const stats = async (query = '') => {
      const res = await t.request({ method: 'GET', url: `/events/1/stats${query}`, token: admin })
      assert.equal(res.statusCode, 200, res.body)
      return res.json()
    }

    test('ticket types with issued, claimed and used counts and revenue; balances loaded', async () => {
      const s = await stats()
      assert.deepEqual(s.totals, EXPECTED.totals)
      assert.deepEqual(
        s.ticket_types.map(
          ({ ticket_uid: _uid, ticket_date: _date, ...rest }: Record<string, unknown>) => rest,
        ),
        EXPECTED.ticket_types,
      )
      assert.deepEqual(
        s.ticket_types.map((x: { ticket_uid: string }) => x.ticket_uid),
        [activity.ticketTypes.weekend, activity.ticketTypes.day, activity.ticketTypes.vip],
      )
    })

    test('uses per access gate: the scanned gate, else the gate on the ticket', async () => {
      assert.deepEqual((await stats()).uses_per_gate, EXPECTED.uses_per_gate)
    })

    test('uses over time follow the selected range, empty buckets included', async () => {
      const day = (await stats()).uses_over_time
      assert.equal(day.range, '24h')
      assert.equal(day.bucket_seconds, 3600)
      assert.equal(day.points.length, 24)
      assert.equal(day.total, 4)
      const now = t.clock.now() / 1000
      const last = day.points.at(-1)
      const threeHoursAgo = day.points.find(
        (p: { t: number }) => p.t <= now - 3 * 3600 && now - 3 * 3600 < p.t + 3600,
      )
      // Three online uses just now, one offline scan three hours ago.
      assert.equal(last.count, 3)
      assert.ok(last.t <= now && now < last.t + 3600)
      assert.equal(threeHoursAgo.count, 1)
      assert.equal(
        day.points.reduce((n: number, p: { count: number }) => n + p.count, 0),
        4,
      )

      const hour = (await stats('?range=1h')).uses_over_time
      assert.equal(hour.bucket_seconds, 300)
      assert.equal(hour.points.length, 12)
      assert.equal(hour.total, 3)
      const month = (await stats('?range=30d')).uses_over_time
      assert.equal(month.points.length, 30)
      assert.equal(month.total, 4)
      // Daily buckets start at midnight in the event's zone (Europe/Berlin).
      const start = month.points[0].t * 1000
      const local = new Date(start + zoneOffsetMs('Europe/Berlin', start))
      assert.equal(local.getUTCHours(), 0)
      assert.equal(local.getUTCMinutes(), 0)
    })

    test('webhook delivery health: delivered, pending, failing and the last error', async () => {
      const w = (await stats()).webhook
      assert.equal(w.configured, true)
      assert.equal(w.url, activity.receiver.url)
      assert.equal(w.disabled, false)
      assert.deepEqual(
        { delivered: w.delivered, pending: w.pending, failing: w.failing, failed: w.failed },
        EXPECTED.webhook,
      )
      assert.equal(w.last_error.message, 'receiver answered HTTP 503')
    })

    test('a new use shows up in the figures, also in polls that share a read', async () => {
      // Polls of one event share reads (at most four a second): one starts a read now, the next waits
      // for the following read. A poll that arrives after the use must see it, whichever read it joins.
      const earlier = [stats(), stats()]
      const res = await t.request({
        method: 'POST',
        url: `/tickets/${activity.unusedTransfer}/use`,
        token: activity.operatorToken,
        payload: { access_gate: 'South' },
      })
      assert.equal(res.statusCode, 200)
      const polls = await Promise.all([stats(), stats(), stats()])
      for (const s of polls) {
        assert.equal(s.totals.used, 5)
        assert.deepEqual(
          s.uses_per_gate.map((g: { access_gate: string; count: number }) => [g.access_gate, g.count]),
          [
            ['North', 2],
            ['South', 2],
            ['East', 1],
          ],
        )
      }
      await Promise.all(earlier)
    })

    test('the page and the API read one source: the session JSON equals the bearer JSON', async () => {
      const session = await dashboardSession(t, 'partner1')
      const page = await t.request({
        method: 'GET',
        url: '/dashboard/api/events/1/stats?range=7d',
        cookies: { wb_session: session },
      })
      const api = await stats('?range=7d')
      const { generated_at: _a, ...fromPage } = page.json()
      const { generated_at: _b, ...fromApi } = api
      assert.deepEqual(fromPage, fromApi)
    })

    test("another event's dashboard user sees none of these figures", async () => {
      const session = await dashboardSession(t, 'partner2')
      const res = await t.request({
        method: 'GET',
        url: '/dashboard/api/events/1/stats',
        cookies: { wb_session: session },
      })
      assert.equal(res.statusCode, 403)
      assert.doesNotMatch(res.body, /Weekend pass|summer/i)
      const own = await t.request({
        method: 'GET',
        url: '/dashboard/api/events/2/stats',
        cookies: { wb_session: session },
      })
      assert.equal(own.statusCode, 200)
      assert.deepEqual(own.json().totals, {
        issued: 0,
        claimed: 0,
        used: 0,
        revenue: 0,
        balance_loaded: 0,
        promo_balance_loaded: 0,
      })
      assert.equal(own.json().webhook.configured, false)
    })
  },
  ACTIVITY_ENV,
)

test('daily buckets start at local midnight on both sides of a DST change', () => {
  const { starts, to } = bucketStarts('Europe/Berlin', Date.parse('2026-10-26T12:00:00Z'), {
    bucketMs: 24 * 3600_000,
    buckets: 3,
  })
  assert.deepEqual(
    starts.map((s) => new Date(s).toISOString()),
    ['2026-10-23T22:00:00.000Z', '2026-10-24T22:00:00.000Z', '2026-10-25T23:00:00.000Z'],
  )
  assert.equal(new Date(to).toISOString(), '2026-10-26T23:00:00.000Z')
  const kolkata = bucketStarts('Asia/Kolkata', Date.parse('2026-11-22T10:10:00Z'), {
    bucketMs: 3600_000,
    buckets: 2,
  })
  assert.deepEqual(
    kolkata.starts.map((s) => new Date(s).toISOString()),
    ['2026-11-22T08:30:00.000Z', '2026-11-22T09:30:00.000Z'],
  )
})
