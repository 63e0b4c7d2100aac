import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { SmsInbox } from '../../test/helpers/sms.js'

const sms = new SmsInbox()
let phoneCounter = 0
function nextPhone(): string {
  phoneCounter++
  return `+49152${String(20_000_000 + phoneCounter).slice(-8)}`
}

forEachBackend(
  httpBackends,
  'phone-ownership check and registration',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
    })

    const startCheck = (phone: string, headers: Record<string, string> = {}) =>
      t.request({ method: 'POST', url: '/verify/messaging/start', payload: { phone }, headers })
    const check = (phone: string, code: string, headers: Record<string, string> = {}) =>
      t.request({ method: 'POST', url: '/verify/messaging/check', payload: { phone, code }, headers })
    const register = (payload: Record<string, unknown>, headers: Record<string, string> = {}) =>
      t.request({ method: 'POST', url: '/auth/register', payload, headers })

    /** Runs start and check for a phone and returns the verification token. */
    async function verified(phone: string): Promise<string> {
      assert.equal((await startCheck(phone)).statusCode, 200)
      const res = await check(phone, sms.codeFor(phone))
      assert.equal(res.statusCode, 200)
      return res.json().verification_token
    }

    test('start sends a 6-digit code; check answers approved with a verification token', async () => {
      const phone = nextPhone()
      const started = await startCheck(phone)
      assert.equal(started.statusCode, 200)
      assert.deepEqual(started.json(), { status: 'pending' })
      assert.match(sms.to(phone)[0]!.text, /^\d{6} is your wristband code$/)
      const res = await check(phone, sms.codeFor(phone))
      assert.equal(res.statusCode, 200)
      const body = res.json()
      assert.equal(body.status, 'approved')
      assert.ok(body.verification_token.length >= 40)
    })

    test('a wrong, used or expired code is 400', async () => {
      const phone = nextPhone()
      await startCheck(phone)
      const code = sms.codeFor(phone)
      const wrong = code === '000000' ? '111111' : '000000'
      assert.equal((await check(phone, wrong)).statusCode, 400)
      assert.equal((await check(phone, code)).statusCode, 200)
      assert.equal((await check(phone, code)).statusCode, 400, 'used')
      const other = nextPhone()
      await startCheck(other)
      t.clock.advance(5 * 60_000 + 1)
      const expired = await check(other, sms.codeFor(other))
      assert.equal(expired.statusCode, 400)
      assert.equal(typeof expired.json().detail, 'string')
    })

    test('after 5 wrong tries the right code is refused', async () => {
      const phone = nextPhone()
      await startCheck(phone)
      const code = sms.codeFor(phone)
      const wrong = code === '000000' ? '111111' : '000000'
      for (let i = 0; i < 5; i++) assert.equal((await check(phone, wrong)).statusCode, 400)
      assert.equal((await check(phone, code)).statusCode, 400)
    })

    test('of concurrent checks of one code exactly one gets a token', async () => {
      const phone = nextPhone()
      await startCheck(phone)
      const code = sms.codeFor(phone)
      const answers = await Promise.all(Array.from({ length: 6 }, () => check(phone, code)))
      assert.deepEqual(answers.map((r) => r.statusCode).sort(), [200, 400, 400, 400, 400, 400])
    })

    test('register creates a consumer and signs it in; the profile shows what was given', async () => {
      const phone = nextPhone()
      const token = await verified(phone)
      const res = await register({
        phone,
        password: 'new-pass-123',
        verification_token: token,
        email: 'New.Person@Example.com',
        first_name: 'New',
        last_name: 'Person',
      })
      assert.equal(res.statusCode, 200)
      const pair = res.json()
      assert.equal(pair.token_type, 'bearer')
      const me = await t.request({ method: 'GET', url: '/consumers/me', token: pair.access_token })
      assert.equal(me.statusCode, 200)
      assert.equal(me.json().phone, phone)
      assert.equal(me.json().email, 'new.person@example.com')
      assert.equal(me.json().first_name, 'New')
      const login = await t.request({
        method: 'POST',
        url: '/auth/login/customer',
        payload: { phone, password: 'new-pass-123' },
      })
      assert.equal(login.statusCode, 200, 'the new consumer signs in with its password')
    })

    test('a verification token works once and only for its phone', async () => {
      const phone = nextPhone()
      const token = await verified(phone)
      const other = await register({
        phone: nextPhone(),
        password: 'new-pass-123',
        verification_token: token,
      })
      assert.equal(other.statusCode, 400, 'token of another phone')
      assert.equal(
        (await register({ phone, password: 'new-pass-123', verification_token: token })).statusCode,
        200,
      )
      const again = await register({
        phone: nextPhone(),
        password: 'new-pass-123',
        verification_token: token,
      })
      assert.equal(again.statusCode, 400)
      const made = await register({ phone, password: 'new-pass-123', verification_token: 'made-up' })
      assert.equal(made.statusCode, 400)
    })

    test('a verification token expires after 15 minutes', async () => {
      const phone = nextPhone()
      const token = await verified(phone)
      t.clock.advance(15 * 60_000 + 1)
      assert.equal(
        (await register({ phone, password: 'new-pass-123', verification_token: token })).statusCode,
        400,
      )
    })

    test('a phone already registered is 409, and the token stays usable', async () => {
      const taken = STANDARD_SEED.customers![0]!.phone
      const token = await verified(taken)
      const res = await register({ phone: taken, password: 'new-pass-123', verification_token: token })
      assert.equal(res.statusCode, 409)
      assert.equal(typeof res.json().detail, 'string')
      const row = await t.db.db
        .selectFrom('phone_verifications')
        .select('used_at')
        .where('phone', '=', taken)
        .executeTakeFirstOrThrow()
      assert.equal(row.used_at, null)
    })

    test('of concurrent registrations of one phone one succeeds, the rest are 409', async () => {
      const phone = nextPhone()
      const tokens = []
      for (let i = 0; i < 3; i++) tokens.push(await verified(phone))
      const answers = await Promise.all(
        tokens.map((verification_token) => register({ phone, password: 'new-pass-123', verification_token })),
      )
      assert.deepEqual(answers.map((r) => r.statusCode).sort(), [200, 409, 409])
    })

    test('validation: short password, bad e-mail, unknown field, bad phone are 422', async () => {
      const phone = nextPhone()
      const base = { phone, password: 'new-pass-123', verification_token: 'x' }
      const cases: [Record<string, unknown>, string, string][] = [
        [{ ...base, password: 'short' }, 'password', 'string_too_short'],
        [{ ...base, email: 'not-an-email' }, 'email', 'string_pattern_mismatch'],
        [{ ...base, role: 'admin' }, 'role', 'extra_forbidden'],
        [{ ...base, phone: '0049' }, 'phone', 'value_error'],
        [{ phone, password: 'new-pass-123' }, 'verification_token', 'missing'],
      ]
      for (const [payload, field, type] of cases) {
        const res = await register(payload)
        assert.equal(res.statusCode, 422, field)
        assert.deepEqual(res.json().detail[0].loc, ['body', field])
        assert.equal(res.json().detail[0].type, type)
      }
      const badStart = await startCheck('+1 555')
      assert.equal(badStart.statusCode, 422)
      assert.deepEqual(badStart.json().detail[0].loc, ['body', 'phone'])
    })

    test('rate limits: start 5, check 30, register 10 per minute and address', async () => {
      const a = { 'x-forwarded-for': '198.51.100.50' }
      for (let i = 0; i < 5; i++) assert.equal((await startCheck(nextPhone(), a)).statusCode, 200)
      const limited = await startCheck(nextPhone(), a)
      assert.equal(limited.statusCode, 429)
      assert.equal(limited.json().limit, 5)
      const b = { 'x-forwarded-for': '198.51.100.51' }
      for (let i = 0; i < 30; i++) assert.equal((await check('+12', '123456', b)).statusCode, 422)
      assert.equal((await check('+12', '123456', b)).statusCode, 429)
      const c = { 'x-forwarded-for': '198.51.100.52' }
      for (let i = 0; i < 10; i++) assert.equal((await register({}, c)).statusCode, 422)
      assert.equal((await register({}, c)).statusCode, 429)
    })
  },
  {},
  () => ({ sms }),
)
