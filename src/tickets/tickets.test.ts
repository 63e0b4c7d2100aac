import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { dashboardSession } from '../../test/helpers/dashboard.js'
import {
  deviceToken,
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerGet,
  seedPartner,
} from '../../test/helpers/partner.js'
import { MAX_BATCH } from './tickets.routes.js'

const LOCAL = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}$/

/** Runs `fn` with the test clock moved to `iso`, then moves it back. */
async function atTime<T>(t: TestApp, iso: string, fn: () => Promise<T>): Promise<T> {
  const delta = Date.parse(iso) - t.clock.now()
  t.clock.advance(delta)
  try {
    return await fn()
  } finally {
    t.clock.advance(-delta)
  }
}

forEachBackend(httpBackends, 'ticket use', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  let scanner: string
  let otherScanner: string
  let ticketUid: string
  let otherTicketUid: string
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
    scanner = (await login(t, 'op@example.com', 'operator')).access_token
    otherScanner = (await login(t, 'op2@example.com', 'operator')).access_token
    ticketUid = await newTicketType(t, keys.write)
    otherTicketUid = await newTicketType(t, keys.other, 'winter-fest-2026')
  })

  const use = (uid: string, token?: string, payload?: Record<string, unknown>) =>
    t.request({
      method: 'POST',
      url: `/tickets/${uid}/use`,
      ...(token ? { token } : {}),
      ...(payload ? { payload } : {}),
    })

  test('the first use answers USED with the local time of the event; a second use is 409 with it', async () => {
    const { transfer_uid, company_ticket_id } = await newTransfer(t, keys.write, ticketUid)
    const first = await use(transfer_uid, scanner, { access_gate: 'North' })
    assert.equal(first.statusCode, 200, first.body)
    const body = first.json()
    assert.equal(body.status, 'USED')
    assert.match(body.used_timestamp, LOCAL)
    const berlin = new Intl.DateTimeFormat('sv-SE', {
      timeZone: 'Europe/Berlin',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
    })
      .format(t.clock.now())
      .replace(' ', 'T')
    assert.equal(body.used_timestamp.slice(0, 16), berlin)
    const second = await use(transfer_uid, scanner)
    assert.equal(second.statusCode, 409)
    assert.equal(second.json().used_timestamp, body.used_timestamp)
    const seen = (await partnerGet(t, `/companies/transfer/${company_ticket_id}`, keys.read)).json()
    assert.equal(seen.status, 'USED')
    assert.equal(seen.used_timestamp, body.used_timestamp)
  })

  test('ten scans of one ticket at once: exactly one 200, nine 409 with the same timestamp', async () => {
    const { transfer_uid } = await newTransfer(t, keys.write, ticketUid)
    const answers = await Promise.all(Array.from({ length: 10 }, () => use(transfer_uid, scanner)))
    const ok = answers.filter((r) => r.statusCode === 200)
    const conflicts = answers.filter((r) => r.statusCode === 409)
    assert.equal(ok.length, 1)
    assert.equal(conflicts.length, 9)
    for (const c of conflicts) assert.equal(c.json().used_timestamp, ok[0]!.json().used_timestamp)
  })

  test('401 without a token, 422 for a malformed uid, 403 without ticket:scan there, 404 unknown', async () => {
    const { transfer_uid } = await newTransfer(t, keys.write, ticketUid)
    assert.equal((await use(transfer_uid)).statusCode, 401)
    assert.equal((await use('not-a-uid', scanner)).statusCode, 422)
    assert.equal((await use(transfer_uid, scanner, { gate: 'x' })).statusCode, 422)
    assert.equal((await use(transfer_uid, otherScanner)).statusCode, 403, 'operator of another event')
    assert.equal(
      (await use(transfer_uid, deviceToken(t, 1, 1))).statusCode,
      403,
      'device tokens carry no ticket:scan',
    )
    assert.equal((await use('0'.repeat(32), scanner)).statusCode, 404)
    assert.equal((await use('0'.repeat(32), deviceToken(t, 1, 1))).statusCode, 403, '403 comes before 404')
    const other = await newTransfer(t, keys.other, otherTicketUid, {}, 'winter-fest-2026')
    assert.equal((await use(other.transfer_uid, otherScanner)).statusCode, 200, 'baseline operator scopes')
    assert.equal((await use(transfer_uid, scanner)).statusCode, 200)
  })

  test('use-batch answers each scan in order; the first processed scan counts', async () => {
    // Transferred before the scans (a scan cannot be dated before its ticket existed).
    const [a, b, foreign] = await atTime(t, '2026-07-18T12:00:00Z', () =>
      Promise.all([
        newTransfer(t, keys.write, ticketUid),
        newTransfer(t, keys.write, ticketUid),
        newTransfer(t, keys.other, otherTicketUid, {}, 'winter-fest-2026'),
      ]),
    )
    assert.equal((await use(b.transfer_uid, scanner)).statusCode, 200)
    // Uploaded shortly after the scans, so their used_at lies within the offline window.
    const res = await atTime(t, '2026-07-19T01:30:00Z', () =>
      t.request({
        method: 'POST',
        url: '/tickets/use-batch',
        token: deviceToken(t, 1, 1),
        payload: {
          scans: [
            { transfer_uid: a.transfer_uid, used_at: '2026-07-18T20:15:30.123+00:00', access_gate: 'South' },
            { transfer_uid: a.transfer_uid, used_at: '2026-07-18T20:10:00Z' },
            { transfer_uid: 'f'.repeat(32), used_at: '2026-07-18T20:10:00Z' },
            { transfer_uid: foreign.transfer_uid, used_at: '2026-07-18T20:10:00Z' },
            { transfer_uid: b.transfer_uid, used_at: '2026-07-18T20:10:00-05:00' },
          ],
        },
      }),
    )
    assert.equal(res.statusCode, 200, res.body)
    const { results } = res.json()
    assert.deepEqual(
      results.map((r: { status: string }) => r.status),
      ['USED', 'ALREADY_USED', 'NOT_FOUND', 'FORBIDDEN', 'ALREADY_USED'],
    )
    assert.deepEqual(results.map((r: { transfer_uid: string }) => r.transfer_uid).slice(0, 2), [
      a.transfer_uid,
      a.transfer_uid,
    ])
    // 20:15:30.123 UTC is 22:15:30.123 in Berlin (summer time).
    assert.equal(results[0].used_timestamp, '2026-07-18T22:15:30.123')
    assert.equal(results[1].used_timestamp, '2026-07-18T22:15:30.123')
    assert.equal(results[2].used_timestamp, undefined)
    const again = await use(a.transfer_uid, scanner)
    assert.equal(again.json().used_timestamp, '2026-07-18T22:15:30.123')
  })

  test('an event stored with a time zone the runtime does not know: each scan answered, the uses counted in UTC, one error line', async () => {
    const [a, b] = await atTime(t, '2026-07-18T12:00:00Z', () =>
      Promise.all([newTransfer(t, keys.write, ticketUid), newTransfer(t, keys.write, ticketUid)]),
    )
    // As an event seeded before zones were checked (the seed refuses Europe/Berln now).
    const setZone = (timezone: string) =>
      t.db.db.updateTable('events').set({ timezone }).where('uid', '=', 'summer-fest-2026').execute()
    await setZone('Europe/Berln')
    try {
      const res = await atTime(t, '2026-07-19T01:30:00Z', () =>
        t.request({
          method: 'POST',
          url: '/tickets/use-batch',
          token: deviceToken(t, 1, 1),
          payload: {
            scans: [
              { transfer_uid: a.transfer_uid, used_at: '2026-07-18T20:15:30.123Z', access_gate: 'South' },
              { transfer_uid: a.transfer_uid, used_at: '2026-07-18T20:16:00Z' },
              { transfer_uid: 'f'.repeat(32), used_at: '2026-07-18T20:10:00Z' },
              { transfer_uid: b.transfer_uid, used_at: '2026-07-18T20:17:00Z' },
            ],
          },
        }),
      )
      assert.equal(res.statusCode, 200, res.body)
      const { results } = res.json()
      assert.deepEqual(
        results.map((r: { status: string }) => r.status),
        ['USED', 'ALREADY_USED', 'NOT_FOUND', 'USED'],
      )
      assert.equal(results[0].used_timestamp, '2026-07-18T20:15:30.123', 'the local time in UTC')
      assert.equal(results[1].used_timestamp, '2026-07-18T20:15:30.123')
      assert.equal(results[3].used_timestamp, '2026-07-18T20:17:00.000')
      // Online too: 409 for the used ticket, as for any.
      assert.equal((await use(b.transfer_uid, scanner)).statusCode, 409)
      const lines = t.logs.filter((l) => l.includes('which the zone database does not know'))
      assert.equal(lines.length, 1, 'one error line for the zone, not one per scan')
      const line = JSON.parse(lines[0]!)
      assert.equal(line.level, 'error')
      assert.equal(line.timezone, 'Europe/Berln')
    } finally {
      await setZone('Europe/Berlin')
    }
  })

  test('use-batch: a scan of a re-issued code version counts, flagged revoked_code in the result and the use record', async () => {
    const old = await newTransfer(t, keys.write, ticketUid)
    const current = await newTransfer(t, keys.write, ticketUid)
    for (const m of [old, current]) {
      const res = await t.request({
        method: 'POST',
        url: `/companies/transfer/${m.company_ticket_id}/reissue`,
        headers: { api_key: keys.write },
      })
      assert.equal(res.statusCode, 200, res.body)
    }
    const usedAt = new Date(t.clock.now()).toISOString()
    const res = await t.request({
      method: 'POST',
      url: '/tickets/use-batch',
      token: deviceToken(t, 1, 1),
      payload: {
        scans: [
          { transfer_uid: old.transfer_uid, used_at: usedAt, version: 1 },
          { transfer_uid: current.transfer_uid, used_at: usedAt, version: 2 },
          { transfer_uid: current.transfer_uid, used_at: usedAt, version: 1 },
        ],
      },
    })
    assert.equal(res.statusCode, 200, res.body)
    assert.deepEqual(
      res.json().results.map((r: { status: string; revoked_code?: true }) => [r.status, r.revoked_code]),
      [
        ['USED', true],
        ['USED', undefined],
        ['ALREADY_USED', true],
      ],
    )
    const rows = await t.db.db
      .selectFrom('transfers')
      .select(['uid', 'status', 'used_revoked_code'])
      .where('uid', 'in', [old.transfer_uid, current.transfer_uid])
      .execute()
    assert.deepEqual(Object.fromEntries(rows.map((r) => [r.uid, [r.status, r.used_revoked_code]])), {
      [old.transfer_uid]: ['USED', 1],
      [current.transfer_uid]: ['USED', null],
    })
    const bad = await t.request({
      method: 'POST',
      url: '/tickets/use-batch',
      token: deviceToken(t, 1, 1),
      payload: { scans: [{ transfer_uid: old.transfer_uid, used_at: usedAt, version: 0 }] },
    })
    assert.equal(bad.statusCode, 422)
    // The dashboard's event page lists the use for follow-up, to the event's staff and to the dashboard
    // users of the ticket's partner; a dashboard user bound to no partner of the event sees none.
    const flaggedFor = async (who: string) => {
      const page = await t.request({
        method: 'GET',
        url: '/dashboard/events/1',
        cookies: { wb_session: await dashboardSession(t, who) },
      })
      assert.equal(page.statusCode, 200)
      const section = page.body.slice(page.body.indexOf('data-flagged-code-uses'))
      return section.slice(0, section.indexOf('</section>'))
    }
    const section = await flaggedFor('root@example.com')
    assert.ok(section.includes(old.company_ticket_id), 'the revoked-code use is listed')
    assert.ok(!section.includes(current.company_ticket_id))
    assert.ok(!(await flaggedFor('partner1')).includes(old.company_ticket_id), 'shown to an unbound user')
    // Bound to the ticket's partner, the dashboard user sees it; bound to another partner of the event, not.
    const root = (await login(t, 'root@example.com')).access_token
    const users = (await t.request({ method: 'GET', url: '/admin/dashboard-users', token: root })).json()
    const { id } = users.find((u: { username: string }) => u.username === 'partner1')
    const bind = async (partner: string | null) => {
      const res = await t.request({
        method: 'PATCH',
        url: `/admin/dashboard-users/${id}`,
        token: root,
        payload: { partner },
      })
      assert.equal(res.statusCode, 200, res.body)
    }
    await bind('Acme')
    assert.ok(
      (await flaggedFor('partner1')).includes(old.company_ticket_id),
      "hidden from its partner's user",
    )
    await bind('Rival')
    assert.ok(
      !(await flaggedFor('partner1')).includes(old.company_ticket_id),
      "shown to another partner's user",
    )
    await bind(null)
  })

  test('use-batch: at most 500 scans, offsets required, a token is required', async () => {
    const scan = { transfer_uid: '0'.repeat(32), used_at: '2026-07-18T20:10:00Z' }
    const token = deviceToken(t, 1, 1)
    const tooMany = await t.request({
      method: 'POST',
      url: '/tickets/use-batch',
      token,
      payload: { scans: Array.from({ length: MAX_BATCH + 1 }, () => scan) },
    })
    assert.equal(tooMany.statusCode, 422)
    const full = await t.request({
      method: 'POST',
      url: '/tickets/use-batch',
      token,
      payload: { scans: Array.from({ length: MAX_BATCH }, () => scan) },
    })
    assert.equal(full.statusCode, 200)
    assert.equal(full.json().results.length, MAX_BATCH)
    const noOffset = await t.request({
      method: 'POST',
      url: '/tickets/use-batch',
      token,
      payload: { scans: [{ ...scan, used_at: '2026-07-18T20:10:00' }] },
    })
    assert.equal(noOffset.statusCode, 422)
    assert.deepEqual(noOffset.json().detail[0].loc, ['body', 'scans', 0, 'used_at'])
    const anon = await t.request({ method: 'POST', url: '/tickets/use-batch', payload: { scans: [scan] } })
    assert.equal(anon.statusCode, 401)
  })

  test('concurrent batches from two devices: one USED per ticket across both', async () => {
    const tickets = await Promise.all(Array.from({ length: 5 }, () => newTransfer(t, keys.write, ticketUid)))
    const usedAt = new Date(t.clock.now()).toISOString()
    const scans = tickets.map((x) => ({ transfer_uid: x.transfer_uid, used_at: usedAt }))
    const [one, two] = await Promise.all(
      [1, 2].map(() =>
        t.request({
          method: 'POST',
          url: '/tickets/use-batch',
          token: deviceToken(t, 1, 1),
          payload: { scans },
        }),
      ),
    )
    const statuses = [...one!.json().results, ...two!.json().results].map((r: { status: string }) => r.status)
    assert.equal(statuses.filter((s) => s === 'USED').length, 5)
    assert.equal(statuses.filter((s) => s === 'ALREADY_USED').length, 5)
  })
})
