// The metrics that features move from outside a request (mail and SMS transports, webhook deliveries,
// the outbox read at scrape time): each documented one moves when its cause happens.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { forEachBackend, login, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { newTicketType, newTransfer, type PartnerKeys, seedPartner } from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { sample } from '../../test/helpers/scrape.js'
import { until } from '../../test/helpers/until.js'
import type { MailMessage, MailTransport } from '../platform/mail.js'
import type { SmsMessage, SmsSender } from '../platform/sms.js'

const METRICS_TOKEN = 'scrape-token-0123456789abcdef'

/** A transport that fails the attempts it is told to, and keeps the messages that went out. */
class Flaky<M> {
  readonly sent: M[] = []
  failures = 0
  async send(message: M): Promise<void> {
    if (this.failures > 0) {
      this.failures--
      throw new Error('transport refused the message')
    }
    this.sent.push(message)
  }
}

const mail = new Flaky<MailMessage>()
const sms = new Flaky<SmsMessage>()

async function scrape(t: TestApp): Promise<string> {
  const res = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
  assert.equal(res.statusCode, 200, res.body)
  return res.body
}

/** Scrapes now, and later tells by how much a sample moved since. */
async function mark(t: TestApp) {
  const before = await scrape(t)
  return async (name: string, labels: Record<string, string> = {}) =>
    sample(await scrape(t), name, labels) - sample(before, name, labels)
}

forEachBackend(
  httpBackends,
  'metrics moved by mail, SMS and webhooks',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let receiver: Receiver
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      receiver = await startReceiver()
    })
    after(() => receiver.close())

    test('wristband_mail_sends_total counts sent and failed attempts', async () => {
      const moved = await mark(t)
      mail.failures = 1
      const res = await t.request({
        method: 'POST',
        url: '/admin/password-reset/email-send',
        payload: { email: 'ev1@example.com' },
      })
      assert.equal(res.statusCode, 200, res.body)
      await until('the failed attempt to be counted', async () => {
        return (await moved('wristband_mail_sends_total', { outcome: 'failed' })) === 1
      })
      // The job queue retries after its first step (10 s).
      t.clock.advance(10_000)
      await until('the retry to be counted', async () => {
        return (await moved('wristband_mail_sends_total', { outcome: 'sent' })) === 1
      })
      assert.equal(await moved('wristband_mail_sends_total', { outcome: 'failed' }), 1)
    })

    test('wristband_sms_sends_total counts sent and failed messages', async () => {
      const moved = await mark(t)
      const phone = STANDARD_SEED.customers![0]!.phone
      const start = () => t.request({ method: 'POST', url: '/auth/login/phone', payload: { phone } })
      sms.failures = 1
      await start()
      await until('the failed SMS to be counted', async () => {
        return (await moved('wristband_sms_sends_total', { outcome: 'failed' })) === 1
      })
      await start()
      await until('the SMS to be counted', async () => {
        return (await moved('wristband_sms_sends_total', { outcome: 'sent' })) === 1
      })
      assert.equal(await moved('wristband_sms_sends_total', { outcome: 'failed' }), 1)
    })

    test('wristband_webhook_deliveries_total by outcome, and the outbox depth while one waits', async () => {
      const scanner = (await login(t, 'op@example.com', 'operator')).access_token
      const registered = await t.request({
        method: 'PUT',
        url: '/companies/webhook',
        headers: { api_key: keys.write },
        payload: { url: receiver.url },
      })
      assert.equal(registered.statusCode, 200, registered.body)
      const use = async () => {
        const transfer = await newTransfer(t, keys.write, await newTicketType(t, keys.write))
        const res = await t.request({
          method: 'POST',
          url: `/tickets/${transfer.transfer_uid}/use`,
          token: scanner,
        })
        assert.equal(res.statusCode, 200, res.body)
      }
      const status = async () =>
        (await t.db.db.selectFrom('webhook_deliveries').select(['status', 'attempts']).execute()).map(
          (d) => `${d.status}/${d.attempts}`,
        )
      const moved = await mark(t)
      assert.equal(sample(await scrape(t), 'wristband_webhook_outbox_depth'), 0)

      // The receiver fails twice: one retry (the schedule has one step), then the service gives up.
      receiver.script.push({ status: 500 }, { status: 500 })
      await use()
      await until('the first attempt', async () => (await status()).includes('pending/1'))
      assert.equal(await moved('wristband_webhook_deliveries_total', { outcome: 'failed' }), 1)
      assert.equal(sample(await scrape(t), 'wristband_webhook_outbox_depth'), 1)
      t.clock.advance(1000)
      await until('the last attempt', async () => (await status()).includes('failed/2'))
      assert.equal(await moved('wristband_webhook_deliveries_total', { outcome: 'gave_up' }), 1)
      assert.equal(sample(await scrape(t), 'wristband_webhook_outbox_depth'), 0)

      await use()
      await until('the delivery', async () => (await status()).includes('delivered/1'))
      assert.equal(await moved('wristband_webhook_deliveries_total', { outcome: 'delivered' }), 1)
      assert.equal(await moved('wristband_webhook_deliveries_total', { outcome: 'failed' }), 1)
    })
  },
  {
    METRICS_TOKEN,
    JOBS_POLL_MS: '20',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    WEBHOOK_RETRY_SCHEDULE: '1',
    TRANSFER_EMAIL_DELAY_SECONDS: '86400',
  },
  () => ({
    mailTransport: mail satisfies MailTransport,
    sms: sms satisfies SmsSender,
  }),
)
