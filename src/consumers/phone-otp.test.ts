import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { SmsInbox } from '../../test/helpers/sms.js'

const sms = new SmsInbox()
let phoneCounter = 0
/** A registered phone of its own per test, so codes and quotas never mix between tests. */
function nextPhone(): string {
  phoneCounter++
  return `+49151${String(10_000_000 + phoneCounter).slice(-8)}`
}

forEachBackend(
  httpBackends,
  'phone sign-in with a one-time code',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
    })

    async function registered(): Promise<string> {
      const phone = nextPhone()
      await t.seed({ customers: [{ phone }] })
      return phone
    }
    const start = (phone: string, headers: Record<string, string> = {}) =>
      t.request({ method: 'POST', url: '/auth/login/phone', payload: { phone }, headers })
    const verify = (phone: string, code: string, headers: Record<string, string> = {}) =>
      t.request({ method: 'POST', url: '/auth/login/phone/verify', payload: { phone, code }, headers })

    test('a registered phone gets a 6-digit code by SMS and signs in with it as a consumer', async () => {
      const phone = await registered()
      const res = await start(phone)
      assert.equal(res.statusCode, 200)
      assert.equal(typeof res.json().message, 'string')
      const [message] = sms.to(phone)
      assert.ok(message)
      assert.match(
        message.text,
        /^\d{6} is your wristband code$/,
        'nothing but the code and the product name',
      )
      const signedIn = await verify(phone, sms.codeFor(phone))
      assert.equal(signedIn.statusCode, 200)
      const { claims } = (
        await t.request({
          method: 'POST',
          url: '/tokens/verify',
          payload: { token: signedIn.json().access_token },
        })
      ).json()
      assert.equal(claims.role, 'consumer')
      assert.ok(claims.permissions['*'].includes('wallet:read'))
    })

    test('an unknown phone gets the same answer and no SMS, and cannot sign in', async () => {
      const known = await registered()
      const unknown = nextPhone()
      const a = await start(known)
      const b = await start(unknown)
      assert.equal(a.statusCode, 200)
      assert.equal(b.statusCode, 200)
      assert.equal(a.body, b.body)
      assert.equal(sms.to(unknown).length, 0)
      const res = await verify(unknown, '000000')
      assert.equal(res.statusCode, 401)
    })

    test('the number is normalised: the code sent to +49 151 … works for the compact form', async () => {
      const phone = await registered()
      await start(`${phone.slice(0, 3)} ${phone.slice(3, 6)} ${phone.slice(6)}`)
      assert.equal((await verify(phone, sms.codeFor(phone))).statusCode, 200)
    })

    test('a code works once', async () => {
      const phone = await registered()
      await start(phone)
      const code = sms.codeFor(phone)
      assert.equal((await verify(phone, code)).statusCode, 200)
      assert.equal((await verify(phone, code)).statusCode, 401)
    })

    test('a code expires after 5 minutes', async () => {
      const phone = await registered()
      await start(phone)
      const code = sms.codeFor(phone)
      t.clock.advance(5 * 60_000 + 1)
      assert.equal((await verify(phone, code)).statusCode, 401)
    })

    test('a code still works just before 5 minutes', async () => {
      const phone = await registered()
      await start(phone)
      t.clock.advance(5 * 60_000 - 2000)
      assert.equal((await verify(phone, sms.codeFor(phone))).statusCode, 200)
    })

    test('after 5 wrong tries the right code no longer works', async () => {
      const phone = await registered()
      await start(phone)
      const code = sms.codeFor(phone)
      const wrong = code === '000000' ? '111111' : '000000'
      for (let i = 0; i < 5; i++) assert.equal((await verify(phone, wrong)).statusCode, 401)
      assert.equal((await verify(phone, code)).statusCode, 401)
    })

    test('4 wrong tries leave the code usable', async () => {
      const phone = await registered()
      await start(phone)
      const code = sms.codeFor(phone)
      const wrong = code === '000000' ? '111111' : '000000'
      for (let i = 0; i < 4; i++) assert.equal((await verify(phone, wrong)).statusCode, 401)
      assert.equal((await verify(phone, code)).statusCode, 200)
    })

    test('of concurrent verifications of one code exactly one wins', async () => {
      const phone = await registered()
      await start(phone)
      const code = sms.codeFor(phone)
      const answers = await Promise.all(Array.from({ length: 8 }, () => verify(phone, code)))
      const statuses = answers.map((r) => r.statusCode).sort()
      assert.deepEqual(statuses, [200, 401, 401, 401, 401, 401, 401, 401])
    })

    test('a new code replaces the previous one', async () => {
      const phone = await registered()
      await start(phone)
      const first = sms.codeFor(phone)
      await start(phone)
      const second = sms.codeFor(phone)
      if (first !== second) assert.equal((await verify(phone, first)).statusCode, 401)
      assert.equal((await verify(phone, second)).statusCode, 200)
    })

    test('a code for phone sign-in is not a registration code and the other way round', async () => {
      const phone = await registered()
      await t.request({ method: 'POST', url: '/verify/messaging/start', payload: { phone } })
      const code = sms.codeFor(phone)
      assert.equal((await verify(phone, code)).statusCode, 401)
    })

    test('at most 5 codes per phone and hour, whatever the address', async () => {
      const phone = await registered()
      for (let i = 0; i < 5; i++) assert.equal((await start(phone)).statusCode, 200)
      const limited = await start(phone)
      assert.equal(limited.statusCode, 429)
      assert.equal(limited.json().error, 'rate_limit_exceeded')
      assert.ok(Number(limited.headers['retry-after']) > 0)
      t.clock.advance(60 * 60_000 + 1000)
      assert.equal((await start(phone)).statusCode, 200)
    })

    test('the code must be exactly 6 characters and the phone valid', async () => {
      const phone = await registered()
      const short = await verify(phone, '12345')
      assert.equal(short.statusCode, 422)
      assert.equal(short.json().detail[0].type, 'string_too_short')
      const long = await verify(phone, '1234567')
      assert.equal(long.json().detail[0].type, 'string_too_long')
      const bad = await start('+49 12')
      assert.equal(bad.statusCode, 422)
      assert.deepEqual(bad.json().detail[0].loc, ['body', 'phone'])
      assert.equal(bad.json().detail[0].type, 'value_error')
    })

    test('rate limits: 30 per minute for sending and for verifying', async () => {
      const headers = { 'x-forwarded-for': '198.51.100.30' }
      for (let i = 0; i < 30; i++) assert.equal((await start('+12', headers)).statusCode, 422)
      assert.equal((await start('+12', headers)).statusCode, 429)
      const other = { 'x-forwarded-for': '198.51.100.31' }
      for (let i = 0; i < 30; i++) assert.equal((await verify('+12', '123456', other)).statusCode, 422)
      assert.equal((await verify('+12', '123456', other)).statusCode, 429)
    })
  },
  {},
  () => ({ sms }),
)
