import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { login, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { dashboardSession } from '../../test/helpers/dashboard.js'
import { tablesHolding } from '../../test/helpers/dump.js'
import {
  claimTokenOf,
  newTicketType,
  type PartnerKeys,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'
import { type SmtpSink, startAppWithMail } from '../../test/helpers/smtp-sink.js'
import { until } from '../../test/helpers/until.js'

/**
 * A reader of the database (a backup, a replica, read-only SQL) finds no secret that grants access:
 * every table is dumped and searched for the secret the user received. Reset and claim links are
 * minted when their e-mail is sent and only their SHA-256 is kept; API keys, refresh tokens and
 * webhook secrets are hashed, signed or sealed.
 */
eachBackend(httpBackends, 'secrets at rest', (backend) => {
  let t: TestApp
  let sink: SmtpSink
  let keys: PartnerKeys
  let close = async () => {}
  before(async () => {
    ;({ t, sink, close } = await startAppWithMail(backend, {
      TRANSFER_EMAIL_DELAY_SECONDS: '0',
      PUBLIC_BASE_URL: 'https://wristband.example',
    }))
    keys = await seedPartner(t)
  })
  after(async () => close())

  /**
   * Waits until no job is left to run now, so what a finished job keeps is what is checked (the
   * retention job always has its next run queued, an hour on).
   */
  const jobsSettled = () =>
    until('every job done', async () => {
      const open = await t.db.db
        .selectFrom('jobs')
        .select('id')
        .where('done_at', 'is', null)
        .where('failed_at', 'is', null)
        .where('run_at', '<=', t.clock.now())
        .execute()
      return open.length === 0
    })

  test('no row of any table holds the token of a password-reset link, before or after its e-mail is sent', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/admin/password-reset/email-send',
      payload: { email: 'root@example.com' },
    })
    assert.equal(res.statusCode, 200, res.body)
    const mail = await sink.waitFor('root@example.com', /Reset your wristband password/)
    const token = /\/admin\/password-reset\/([A-Za-z0-9_-]{43})/.exec(mail.text ?? '')?.[1]
    assert.ok(token, `no reset link in ${mail.text}`)
    assert.deepEqual(await tablesHolding(t.db, token), [], 'reset token readable in the database')
    await jobsSettled()
    assert.deepEqual(await tablesHolding(t.db, token), [], 'reset token readable after sending')
    // The link still works: the check above did not pass by losing the token.
    const used = await t.request({
      method: 'POST',
      url: `/admin/password-reset/${token}`,
      payload: { new_password: 'a-new-password-1' },
    })
    assert.equal(used.statusCode, 200, used.body)
  })

  test('no row of any table holds the claim token of a grouped transfer e-mail', async () => {
    const ticketUid = await newTicketType(t, keys.write)
    for (const id of ['rest-1', 'rest-2']) {
      const res = await partnerPost(t, '/companies/transfer', keys.write, {
        event_uid: 'summer-fest-2026',
        email: 'rest-holder@example.com',
        ticket_uid: ticketUid,
        company_ticket_id: id,
      })
      assert.equal(res.statusCode, 201, res.body)
    }
    const mail = await sink.waitFor('rest-holder@example.com', /ticket/)
    const token = claimTokenOf(mail.text ?? '')
    await jobsSettled()
    assert.deepEqual(await tablesHolding(t.db, token), [], 'claim token readable in the database')
    const link = await t.request({ method: 'GET', url: `/holder/links/${token}` })
    assert.equal(link.statusCode, 200, link.body)
  })

  test('no row of any table holds an API key, a session cookie, a refresh token or an access token handed out over HTTP', async () => {
    const session = await login(t, 'ev1@example.com')
    const res = await t.request({
      method: 'POST',
      url: '/tokens/api-key',
      token: session.access_token,
      payload: { event_id: 1, name: 'at-rest', scopes: ['api:read'] },
    })
    assert.equal(res.statusCode, 200, res.body)
    const apiKey: string = res.json().api_key
    const cookie = await dashboardSession(t, 'partner1')
    await jobsSettled()
    for (const [what, secret] of [
      ['API key', apiKey],
      ['dashboard session cookie', cookie],
      ['refresh token', session.refresh_token],
      ['access token', session.access_token],
    ] as const)
      assert.deepEqual(await tablesHolding(t.db, secret), [], `${what} readable in the database`)
  })
})
