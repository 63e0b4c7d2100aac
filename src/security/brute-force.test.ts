import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { generateSync } from 'otplib'
import { eventAdmin, forEachBackend, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { SmsInbox } from '../../test/helpers/sms.js'
import { BACKOFF_POLICY } from '../platform/backoff.js'

/**
 * Per-account limits hold however the attacker spreads requests over addresses: every request here
 * names its own X-Forwarded-For, so the per-address limits never apply. Each lock also lapses, so an
 * attacker cannot keep a real user out for longer than the documented maximum.
 */
const sms = new SmsInbox()
let addr = 0
/** A client address never used before, from a range of its own (t.request's addresses are 10.x). */
const rotating = () => {
  addr++
  return { 'x-forwarded-for': `172.16.${(addr >> 8) & 255}.${addr & 255}` }
}

forEachBackend(
  httpBackends,
  'brute force: per-account limits a rotating X-Forwarded-For cannot bypass',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed({
        ...withStandardSeed({
          administrators: [eventAdmin('mfa-target@example.com')],
          operators: [{ email: 'gate@example.com', password: 's3cret-pass', event_id: 1, mode: 0 }],
        }),
        customers: [
          { phone: '+4915100000101', password: 's3cret-pass' },
          { phone: '+4915100000102', password: 's3cret-pass' },
        ],
      })
    })

    test('customer login: failures from many addresses lock the account; the lock lapses', async () => {
      const attempt = (password: string) =>
        t.request({
          method: 'POST',
          url: '/auth/login/customer',
          payload: { phone: '+4915100000101', password },
          headers: rotating(),
        })
      for (let i = 0; i <= BACKOFF_POLICY.FREE_FAILURES; i++)
        assert.equal((await attempt('wrong-password')).statusCode, 401)
      const locked = await attempt('s3cret-pass')
      assert.equal(locked.statusCode, 429, 'the right password is refused while the account is locked')
      assert.ok(Number(locked.headers['retry-after']) >= 1)
      // Another consumer is not affected.
      const other = await t.request({
        method: 'POST',
        url: '/auth/login/customer',
        payload: { phone: '+4915100000102', password: 's3cret-pass' },
        headers: rotating(),
      })
      assert.equal(other.statusCode, 200)
      t.clock.advance(BACKOFF_POLICY.MAX_LOCK_MS + 1)
      assert.equal((await attempt('s3cret-pass')).statusCode, 200, 'the real user gets in once it lapses')
    })

    test('phone OTP verify: the code dies after 5 wrong tries from 5 addresses; a new code works', async () => {
      const phone = '+4915100000102'
      const start = () =>
        t.request({ method: 'POST', url: '/auth/login/phone', payload: { phone }, headers: rotating() })
      const verify = (code: string) =>
        t.request({
          method: 'POST',
          url: '/auth/login/phone/verify',
          payload: { phone, code },
          headers: rotating(),
        })
      assert.equal((await start()).statusCode, 200)
      const code = sms.codeFor(phone)
      const wrong = code === '000000' ? '111111' : '000000'
      for (let i = 0; i < 5; i++) assert.equal((await verify(wrong)).statusCode, 401)
      assert.equal((await verify(code)).statusCode, 401, 'the right code is dead after 5 wrong tries')
      // Five codes an hour per number, whatever the address: at most 25 guesses an hour.
      for (let i = 0; i < 4; i++) assert.equal((await start()).statusCode, 200)
      assert.equal((await start()).statusCode, 429)
      // The real user is not locked out for good: the quota lapses and a fresh code signs in.
      t.clock.advance(60 * 60_000 + 1000)
      assert.equal((await start()).statusCode, 200)
      assert.equal((await verify(sms.codeFor(phone))).statusCode, 200)
    })

    test('operator token: failures from many addresses lock the operator; the lock lapses', async () => {
      const attempt = (password: string) =>
        t.request({
          method: 'POST',
          url: '/devices/operator-token',
          payload: { email: 'gate@example.com', password, dev_type: 'POS', dev_mac: 'AA:BB:CC:DD:EE:01' },
          headers: rotating(),
        })
      for (let i = 0; i <= BACKOFF_POLICY.FREE_FAILURES; i++)
        assert.equal((await attempt('wrong-password')).statusCode, 401)
      assert.equal((await attempt('s3cret-pass')).statusCode, 429)
      t.clock.advance(BACKOFF_POLICY.MAX_LOCK_MS + 1)
      assert.equal((await attempt('s3cret-pass')).statusCode, 200)
    })

    test('TOTP verify: wrong codes from many addresses lock the account; the lock lapses', async () => {
      let token = (await login(t, 'mfa-target@example.com')).access_token
      const setup = await t.request({ method: 'POST', url: '/admin/mfa/setup', token })
      assert.equal(setup.statusCode, 200, setup.body)
      const { secret } = setup.json() as { secret: string }
      const codeNow = () => generateSync({ secret, epoch: Math.floor(t.clock.now() / 1000) })
      const verify = (code: string) =>
        t.request({
          method: 'POST',
          url: '/admin/mfa/verify',
          token,
          payload: { code },
          headers: rotating(),
        })
      const right = codeNow()
      // A code from far outside the accepted window is wrong whatever the step.
      const wrong = right === '000000' ? '111111' : '000000'
      for (let i = 0; i <= BACKOFF_POLICY.FREE_FAILURES; i++)
        assert.equal((await verify(wrong)).statusCode, 400)
      const locked = await verify(codeNow())
      assert.equal(locked.statusCode, 429, 'the right code is refused while the account is locked')
      assert.ok(Number(locked.headers['retry-after']) >= 1)
      t.clock.advance(BACKOFF_POLICY.MAX_LOCK_MS + 1)
      token = (await login(t, 'mfa-target@example.com')).access_token
      const ok = await verify(codeNow())
      assert.equal(ok.statusCode, 200, ok.body)
    })
  },
  {},
  () => ({ sms }),
)
