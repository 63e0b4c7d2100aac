import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  claimTokenOf,
  consumerToken,
  customerId,
  newTicketType,
  outboxMail,
  type PartnerKeys,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'
import { waitFor } from '../../test/helpers/until.js'
import { sha256Hex } from '../platform/digest.js'

const EVENT = 'summer-fest-2026'

forEachBackend(
  httpBackends,
  'holder links and consumer tickets',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let ticketUid: string
    let alice: string
    let bob: string
    let carol: string
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      ticketUid = await newTicketType(t, keys.write)
      alice = consumerToken(t, await customerId(t, '+4915100000001'))
      bob = consumerToken(t, await customerId(t, '+4915100000002'))
      carol = consumerToken(t, await customerId(t, '+4915100000003'))
    })

    /** Sends transfers to `email` and returns the claim token of the e-mail that follows. */
    async function transfersTo(email: string, amounts: [number, number][]): Promise<string> {
      const before = outboxMail(t).length
      for (const [balance, promo_balance] of amounts) {
        const res = await partnerPost(t, '/companies/transfer', keys.write, {
          event_uid: EVENT,
          email,
          ticket_uid: ticketUid,
          company_ticket_id: `h-${email}-${Math.random()}`,
          balance,
          promo_balance,
        })
        assert.equal(res.statusCode, 201, res.body)
      }
      const mail = await waitFor(() =>
        outboxMail(t)
          .slice(before)
          .find((m) => m.to === email.toLowerCase()),
      )
      return claimTokenOf(mail.text)
    }

    const claim = (token: string, bearer?: string) =>
      t.request({ method: 'POST', url: `/holder/links/${token}/claim`, ...(bearer ? { token: bearer } : {}) })

    test('a link shows its event and tickets; claiming moves tickets and exact balances to the consumer', async () => {
      const token = await transfersTo('Claim.Me@Example.com', [
        [19.99, 0.07],
        [0.01, 0],
        [1000000.01, 5],
      ])
      const shown = await t.request({ method: 'GET', url: `/holder/links/${token}` })
      assert.equal(shown.statusCode, 200)
      const view = shown.json()
      assert.equal(view.event_uid, EVENT)
      assert.equal(view.email, 'claim.me@example.com')
      assert.equal(view.claimed, false)
      assert.equal(view.tickets.length, 3)
      assert.deepEqual(
        view.tickets.map((x: { balance: number }) => x.balance),
        [19.99, 0.01, 1000000.01],
      )

      const claimed = await claim(token, alice)
      assert.equal(claimed.statusCode, 200, claimed.body)
      assert.equal(claimed.json().claimed, true)
      assert.ok(claimed.json().tickets.every((x: { status: string }) => x.status === 'CLAIMED'))

      const mine = await t.request({ method: 'GET', url: '/consumers/me/tickets', token: alice })
      assert.equal(mine.statusCode, 200)
      assert.equal(mine.json().tickets.length, 3)
      const wallets = (await t.request({ method: 'GET', url: '/consumers/me/wallets', token: alice })).json()
      assert.equal(wallets.wallets.length, 1)
      assert.equal(wallets.wallets[0].event_uid, EVENT)
      assert.equal(wallets.wallets[0].balance, 1000020.01)
      assert.equal(wallets.wallets[0].promo_balance, 5.07)
      const row = await t.db.db.selectFrom('wallets').selectAll().executeTakeFirstOrThrow()
      assert.equal(Number(row.balance), 100002001)
      assert.equal(Number(row.promo_balance), 507)

      // The same consumer again: nothing changes; another consumer: 409.
      assert.equal((await claim(token, alice)).statusCode, 200)
      const again = (await t.request({ method: 'GET', url: '/consumers/me/wallets', token: alice })).json()
      assert.equal(again.wallets[0].balance, 1000020.01)
      const stolen = await claim(token, bob)
      assert.equal(stolen.statusCode, 409)
      assert.equal(stolen.json().error, 'already_claimed')
      assert.equal(
        (await t.request({ method: 'GET', url: '/consumers/me/tickets', token: bob })).json().tickets.length,
        0,
      )
    })

    test('once claimed, the link shows no ticket codes: a re-issue after a leak is not undone by the e-mail', async () => {
      const before = outboxMail(t).length
      const sent = await partnerPost(t, '/companies/transfer', keys.write, {
        event_uid: EVENT,
        email: 'forwarded@example.com',
        ticket_uid: ticketUid,
        company_ticket_id: 'leaked-1',
        balance: 0,
        promo_balance: 0,
      })
      assert.equal(sent.statusCode, 201, sent.body)
      const token = claimTokenOf(
        (
          await waitFor(() =>
            outboxMail(t)
              .slice(before)
              .find((m) => m.to === 'forwarded@example.com'),
          )
        ).text,
      )
      const link = () => t.request({ method: 'GET', url: `/holder/links/${token}` })
      const open = (await link()).json().tickets[0]
      assert.match(open.ticket_code, /^ey/)
      assert.match(open.ticket_qr, /^data:image\/png;base64,/)

      // The claim's answer goes to the new owner, with the codes.
      const claimed = await claim(token, alice)
      assert.equal(claimed.statusCode, 200, claimed.body)
      assert.equal(claimed.json().tickets[0].ticket_code, open.ticket_code)

      const shown = (await link()).json()
      assert.equal(shown.claimed, true)
      assert.equal(shown.tickets[0].status, 'CLAIMED')
      assert.equal(shown.tickets[0].ticket_code, null)
      assert.equal(shown.tickets[0].ticket_qr, undefined)

      const reissued = await t.request({
        method: 'POST',
        url: '/companies/transfer/leaked-1/reissue',
        headers: { api_key: keys.write },
      })
      assert.equal(reissued.statusCode, 200, reissued.body)
      const current = reissued.json().ticket_code
      assert.notEqual(current, open.ticket_code)
      assert.equal((await link()).json().tickets[0].ticket_code, null)
      const mine = (await t.request({ method: 'GET', url: '/consumers/me/tickets', token: alice })).json()
      assert.equal(
        mine.tickets.find((x: { transfer_uid: string }) => x.transfer_uid === sent.json().transfer_uid)
          .ticket_code,
        current,
      )
    })

    test('two consumers claiming one link at once: exactly one wins', async () => {
      const token = await transfersTo('race-claim@example.com', [[10, 0]])
      const answers = await Promise.all([
        claim(token, bob),
        claim(token, carol),
        claim(token, bob),
        claim(token, carol),
      ])
      const winners = answers.filter((r) => r.statusCode === 200)
      const losers = answers.filter((r) => r.statusCode === 409)
      assert.equal(winners.length + losers.length, 4)
      assert.ok(winners.length >= 1 && losers.length >= 1)
      const bobs = (await t.request({ method: 'GET', url: '/consumers/me/wallets', token: bob })).json()
        .wallets
      const carols = (await t.request({ method: 'GET', url: '/consumers/me/wallets', token: carol })).json()
        .wallets
      const total = [...bobs, ...carols].reduce((s: number, w: { balance: number }) => s + w.balance, 0)
      assert.equal(total, 10, 'the balance was moved more than once or lost')
      assert.equal(bobs.length + carols.length, 1)
    })

    test('claim tokens are stored only as hashes; unknown tokens are 404', async () => {
      const token = await transfersTo('hashed@example.com', [[0, 0]])
      const stored = await t.db.db
        .selectFrom('holder_link_tokens')
        .select('token_hash')
        .where('token_hash', '=', sha256Hex(token))
        .executeTakeFirst()
      assert.ok(stored)
      const jobs = await t.db.db.selectFrom('jobs').select('payload').execute()
      assert.ok(
        jobs.every((j) => !j.payload.includes(token)),
        'the plaintext token rests in the job queue',
      )
      assert.equal(Buffer.from(token, 'base64url').length, 32)
      const unknown = 'A'.repeat(43)
      assert.equal((await t.request({ method: 'GET', url: `/holder/links/${unknown}` })).statusCode, 404)
      assert.equal((await claim(unknown, alice)).statusCode, 404)
      assert.equal((await t.request({ method: 'GET', url: '/holder/links/short' })).statusCode, 422)
    })

    test('claiming needs a consumer token; the consumer routes refuse other roles', async () => {
      const token = await transfersTo('roles@example.com', [[0, 0]])
      assert.equal((await claim(token)).statusCode, 401)
      const op = (await login(t, 'op@example.com', 'operator')).access_token
      assert.equal((await claim(token, op)).statusCode, 403)
      assert.equal(
        (await t.request({ method: 'GET', url: '/consumers/me/tickets', token: op })).statusCode,
        403,
      )
      assert.equal((await t.request({ method: 'GET', url: '/consumers/me/wallets' })).statusCode, 401)
    })

    test('after a claim, new transfers to the address start a new link', async () => {
      const first = await transfersTo('twice@example.com', [[1, 0]])
      assert.equal((await claim(first, carol)).statusCode, 200)
      const second = await transfersTo('twice@example.com', [[2, 0]])
      assert.notEqual(second, first)
      const view = (await t.request({ method: 'GET', url: `/holder/links/${second}` })).json()
      assert.equal(view.claimed, false)
      assert.equal(view.tickets.length, 1)
      assert.equal(view.tickets[0].balance, 2)
    })
  },
  { TRANSFER_EMAIL_DELAY_SECONDS: '0', JOBS_POLL_MS: '20' },
)
