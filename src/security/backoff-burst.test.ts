import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { generateSync } from 'otplib'
import { eventAdmin, forEachBackend, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { cookieOf, formToken } from '../../test/helpers/dashboard.js'
import { SmsInbox } from '../../test/helpers/sms.js'
import { until } from '../../test/helpers/until.js'
import { MAX_WRONG_TRIES } from '../consumers/phone-codes.js'
import { BACKOFF_POLICY } from '../platform/backoff.js'

/**
 * Audit of 2026-11-23, item 2: guesses sent at the same instant from different addresses were all
 * checked (the lock was read, the credential verified, the failure recorded afterwards), so a burst of
 * 300 got past a budget of 5 and the right password among them signed in. Now every place that uses
 * the per-account back-off counts the attempt before checking the credential.
 *
 * Each burst is BURST wrong guesses plus the right credential last, every request from its own
 * X-Forwarded-For address (t.request), so no per-address limit takes part. A guess that was checked
 * answers 401 (400 for TOTP codes); one refused unchecked answers 429. At most the free failures and
 * the one that starts the lock may be checked, and the right credential is refused.
 */
const BURST = 150
const MAX_CHECKED = BACKOFF_POLICY.FREE_FAILURES + 1
const sms = new SmsInbox()

/**
 * Sends every request at once, the right credential last, and sorts the answers. The clock stands
 * still meanwhile, so the one-second lock the burst starts cannot lapse on a slow machine.
 */
async function burst(
  t: TestApp,
  send: (secret: string) => Promise<LightMyRequestResponse>,
  wrong: string,
  right: string,
  checkedStatus = 401,
) {
  t.clock.freeze()
  const answers = await Promise.all([
    ...Array.from({ length: BURST }, () => send(wrong)),
    send(right),
  ]).finally(() => t.clock.thaw())
  const last = answers.pop()!
  const statuses = answers.map((a) => a.statusCode)
  const checked = statuses.filter((s) => s === checkedStatus).length
  const refused = statuses.filter((s) => s === 429).length
  assert.equal(checked + refused, BURST, `unexpected answers: ${[...new Set(statuses)].join(', ')}`)
  assert.ok(checked >= 1, 'the first guesses are checked')
  assert.ok(checked <= MAX_CHECKED, `${checked} of ${BURST} simultaneous guesses were checked`)
  assert.equal(last.statusCode, 429, `the right credential after the burst got ${last.statusCode}`)
  return last
}

forEachBackend(
  httpBackends,
  'back-off burst: simultaneous guesses are held to the free budget (audit item 2)',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed({
        ...withStandardSeed({
          administrators: [
            eventAdmin('burst-staff@example.com'),
            eventAdmin('burst-mfa@example.com'),
            eventAdmin('burst-both@example.com'),
          ],
          operators: [{ email: 'burst-gate@example.com', password: 's3cret-pass', event_id: 1, mode: 0 }],
        }),
        customers: [
          { phone: '+4915100000201', password: 's3cret-pass' },
          { phone: '+4915100000202', password: 's3cret-pass' },
        ],
        dashboard_users: [{ username: 'burst-partner', password: 's3cret-pass', event_ids: [1] }],
      })
    })
    /** After the lock lapses the real user gets in: the right credential was right all along. */
    const lapse = () => t.clock.advance(BACKOFF_POLICY.MAX_LOCK_MS + 1)

    test('staff login: a burst of wrong passwords checks at most the free budget', async () => {
      const send = (password: string) =>
        t.request({
          method: 'POST',
          url: '/auth/login',
          payload: { email: 'burst-staff@example.com', password, role: 'admin' },
        })
      await burst(t, send, 'wrong-password', 's3cret-pass')
      lapse()
      assert.equal((await send('s3cret-pass')).statusCode, 200)
    })

    test('customer login: a burst of wrong passwords checks at most the free budget', async () => {
      const send = (password: string) =>
        t.request({
          method: 'POST',
          url: '/auth/login/customer',
          payload: { phone: '+4915100000201', password },
        })
      await burst(t, send, 'wrong-password', 's3cret-pass')
      lapse()
      assert.equal((await send('s3cret-pass')).statusCode, 200)
    })

    test('operator token: a burst of wrong passwords checks at most the free budget', async () => {
      const send = (password: string) =>
        t.request({
          method: 'POST',
          url: '/devices/operator-token',
          payload: {
            email: 'burst-gate@example.com',
            password,
            dev_type: 'POS',
            dev_mac: 'AA:BB:CC:DD:EE:01',
          },
        })
      await burst(t, send, 'wrong-password', 's3cret-pass')
      lapse()
      assert.equal((await send('s3cret-pass')).statusCode, 200)
    })

    /**
     * Posts the dashboard's sign-in form for `username`: every form is fetched first (its CSRF cookie
     * and token), so that all can then be posted at once.
     */
    async function dashboardSender(username: string) {
      const forms = await Promise.all(
        Array.from({ length: BURST + 2 }, async () => {
          const page = await t.request({ method: 'GET', url: '/dashboard/login' })
          return { cookie: cookieOf(page, 'wb_login_csrf')!.value, csrf: formToken(page.body) }
        }),
      )
      return (password: string) => {
        const form = forms.pop()!
        return t.request({
          method: 'POST',
          url: '/dashboard/login',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          cookies: { wb_login_csrf: form.cookie },
          payload: new URLSearchParams({ username, password, csrf_token: form.csrf }).toString(),
        })
      }
    }

    test('dashboard sign-in: a burst of wrong passwords checks at most the free budget', async () => {
      const send = await dashboardSender('burst-partner')
      await burst(t, send, 'wrong-password', 's3cret-pass')
      lapse()
      assert.equal((await send('s3cret-pass')).statusCode, 303)
    })

    test('one budget: a burst split between the dashboard and /auth/login checks at most the free budget', async () => {
      // An e-mail address at the dashboard counts on three keys in one step, the administrator's among them.
      const dashboard = await dashboardSender('burst-both@example.com')
      let sent = 0
      const send = (password: string) =>
        sent++ % 2 === 0
          ? dashboard(password)
          : t.request({
              method: 'POST',
              url: '/auth/login',
              payload: { email: 'burst-both@example.com', password, role: 'admin' },
            })
      await burst(t, send, 'wrong-password', 's3cret-pass')
      lapse()
      assert.equal((await dashboard('s3cret-pass')).statusCode, 303)
    })

    test('MFA verify: a burst of wrong codes checks at most the free budget', async () => {
      const { access_token } = await login(t, 'burst-mfa@example.com')
      const setup = await t.request({ method: 'POST', url: '/admin/mfa/setup', token: access_token })
      assert.equal(setup.statusCode, 200, setup.body)
      const { secret } = setup.json() as { secret: string }
      const code = generateSync({ secret, epoch: Math.floor(t.clock.now() / 1000) })
      const send = (c: string) =>
        t.request({ method: 'POST', url: '/admin/mfa/verify', token: access_token, payload: { code: c } })
      await burst(t, send, code === '000000' ? '111111' : '000000', code, 400)
      lapse()
      const fresh = (await login(t, 'burst-mfa@example.com')).access_token
      const now = generateSync({ secret, epoch: Math.floor(t.clock.now() / 1000) })
      const ok = await t.request({
        method: 'POST',
        url: '/admin/mfa/verify',
        token: fresh,
        payload: { code: now },
      })
      assert.equal(ok.statusCode, 200, ok.body)
    })

    test('phone OTP: a burst of wrong codes spends at most the tries one code has', async () => {
      const phone = '+4915100000202'
      const start = await t.request({ method: 'POST', url: '/auth/login/phone', payload: { phone } })
      assert.equal(start.statusCode, 200)
      await until('the sign-in SMS', () => sms.to(phone).length > 0)
      const code = sms.codeFor(phone)
      const send = (c: string) =>
        t.request({ method: 'POST', url: '/auth/login/phone/verify', payload: { phone, code: c } })
      // A dead code answers the same 401 as a wrong one, so the tries are read from the stored code.
      const answers = await Promise.all([
        ...Array.from({ length: BURST }, () => send(code === '000000' ? '111111' : '000000')),
        send(code),
      ])
      assert.deepEqual([...new Set(answers.map((a) => a.statusCode))], [401])
      const row = await t.db.db
        .selectFrom('phone_codes')
        .select('attempts')
        .where('phone', '=', phone)
        .where('purpose', '=', 'login')
        .executeTakeFirstOrThrow()
      assert.ok(
        row.attempts <= MAX_WRONG_TRIES,
        `${row.attempts} of ${BURST} simultaneous codes were checked against one code`,
      )
    })
  },
  {},
  () => ({ sms }),
)
