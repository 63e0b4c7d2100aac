// Event activity created through the partner, holder and ticket APIs, shared by the dashboard's
// HTTP and browser tests, with the figures it must produce.
import assert from 'node:assert/strict'
import { login, type TestApp } from './app.js'
import {
  claimTokenOf,
  consumerToken,
  customerId,
  outboxMail,
  type PartnerKeys,
  partnerPost,
  seedPartner,
} from './partner.js'
import { type Receiver, startReceiver } from './receiver.js'
import { waitFor } from './until.js'

/** Transfer e-mails at once, jobs polled often, a receiver on loopback, and no retry within a test run. */
export const ACTIVITY_ENV = {
  TRANSFER_EMAIL_DELAY_SECONDS: '0',
  JOBS_POLL_MS: '20',
  WEBHOOK_ALLOW_PRIVATE: 'true',
  WEBHOOK_RETRY_SCHEDULE: '3600,7200',
}

export const EVENT_UID = 'summer-fest-2026'

export interface Activity {
  keys: PartnerKeys
  receiver: Receiver
  /** A transfer of event 1 not used yet, for tests that add a use later. */
  unusedTransfer: string
  operatorToken: string
  ticketTypes: { weekend: string; day: string; vip: string }
}

/**
 * Event 1 gets three ticket types and five transfers (two to one holder, who claims them); four are
 * used (three online at gates North, North and South, one offline three hours ago without a gate, so
 * its own gate East counts); the receiver accepts the first two notifications and answers 503 to the
 * next two.
 */
export async function createActivity(t: TestApp): Promise<Activity> {
  const keys = await seedPartner(t)
  await t.seed({
    dashboard_users: [
      // Bound to the partners of the keys (seedPartner): a dashboard user sees its partner's deliveries.
      { username: 'partner1', password: 's3cret-pass', event_ids: [1], partner: 'Acme' },
      { username: 'partner2', password: 's3cret-pass', event_ids: [2], partner: 'Other' },
    ],
  })
  const receiver = await startReceiver([{ status: 200 }, { status: 200 }, { status: 503 }, { status: 503 }])
  const hook = await t.request({
    method: 'PUT',
    url: '/companies/webhook',
    headers: { api_key: keys.write },
    payload: { url: receiver.url },
  })
  assert.equal(hook.statusCode, 200, hook.body)

  const ticketType = async (name: string, price: number) => {
    const res = await partnerPost(t, '/companies/ticket', keys.write, {
      event_uid: EVENT_UID,
      name,
      price,
      ticket_date: '2026-07-18T10:00:00.000',
    })
    assert.equal(res.statusCode, 201, res.body)
    return res.json().ticket_uid as string
  }
  const weekend = await ticketType('Weekend pass', 89.5)
  const day = await ticketType('Day pass', 49.9)
  const vip = await ticketType('VIP lounge', 199)

  let n = 0
  const transfer = async (
    ticket_uid: string,
    email: string,
    balance: number,
    promo_balance: number,
    access_gate?: string,
  ) => {
    n++
    const res = await partnerPost(t, '/companies/transfer', keys.write, {
      event_uid: EVENT_UID,
      email,
      ticket_uid,
      company_ticket_id: `dash-${n}`,
      balance,
      promo_balance,
      ...(access_gate ? { additional_info: { access_gate, seat_number: `${n}` } } : {}),
    })
    assert.equal(res.statusCode, 201, res.body)
    return res.json().transfer_uid as string
  }
  const t1 = await transfer(weekend, 'fan1@example.com', 10, 0.5, 'North')
  const t2 = await transfer(day, 'fan1@example.com', 0.1, 0.2, 'South')
  const t3 = await transfer(weekend, 'fan2@example.com', 20.25, 0)
  const t4 = await transfer(weekend, 'fan3@example.com', 0, 5)
  // Transferred before its offline scan three hours ago: a scan is never kept from before its ticket existed.
  t.clock.advance(-4 * 3600_000)
  const t5 = await transfer(day, 'fan4@example.com', 0, 0, 'East')
  t.clock.advance(4 * 3600_000)

  const mail = await waitFor(() => outboxMail(t).find((m) => m.to === 'fan1@example.com'))
  const holder = consumerToken(t, await customerId(t, '+4915100000001'))
  const claim = await t.request({
    method: 'POST',
    url: `/holder/links/${claimTokenOf(mail.text)}/claim`,
    token: holder,
  })
  assert.equal(claim.statusCode, 200, claim.body)

  const op = (await login(t, 'op@example.com', 'operator')).access_token
  for (const [uid, gate] of [
    [t1, 'North'],
    [t3, 'North'],
    [t2, 'South'],
  ] as const) {
    const res = await t.request({
      method: 'POST',
      url: `/tickets/${uid}/use`,
      token: op,
      payload: { access_gate: gate },
    })
    assert.equal(res.statusCode, 200, res.body)
  }
  const batch = await t.request({
    method: 'POST',
    url: '/tickets/use-batch',
    token: op,
    payload: { scans: [{ transfer_uid: t5, used_at: new Date(t.clock.now() - 3 * 3600_000).toISOString() }] },
  })
  assert.equal(batch.json().results[0].status, 'USED', batch.body)
  // Every notification has had its first attempt, and its outcome is stored.
  await waitFor(async () => {
    const tried = await t.db.db
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('event_id', '=', 1)
      .where('attempts', '>', 0)
      .execute()
    return tried.length === 4
  })
  return { keys, receiver, unusedTransfer: t4, operatorToken: op, ticketTypes: { weekend, day, vip } }
}

/** The figures `createActivity` must produce (money in the API's decimal numbers). */
export const EXPECTED = {
  totals: {
    issued: 5,
    claimed: 2,
    used: 4,
    revenue: 368.3,
    balance_loaded: 30.35,
    promo_balance_loaded: 5.7,
  },
  ticket_types: [
    { name: 'Weekend pass', price: 89.5, issued: 3, claimed: 1, used: 2, revenue: 268.5 },
    { name: 'Day pass', price: 49.9, issued: 2, claimed: 1, used: 2, revenue: 99.8 },
    { name: 'VIP lounge', price: 199, issued: 0, claimed: 0, used: 0, revenue: 0 },
  ],
  uses_per_gate: [
    { access_gate: 'North', count: 2 },
    { access_gate: 'East', count: 1 },
    { access_gate: 'South', count: 1 },
  ],
  webhook: { delivered: 2, pending: 0, failing: 2, failed: 0 },
}
