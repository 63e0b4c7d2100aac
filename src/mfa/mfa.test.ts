import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { generateSync } from 'otplib'
import { login, STANDARD_SEED, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import type { TestClock } from '../../test/helpers/clock.js'
import { assertPerMinuteLimit } from '../../test/helpers/rate-limit.js'
import { type SmtpSink, startAppWithMail } from '../../test/helpers/smtp-sink.js'

const STEP_MS = 30_000

/** A code from an implementation independent of the service's (otplib, not otpauth). */
function codeAt(secret: string, ms: number): string {
  return generateSync({ secret, epoch: Math.floor(ms / 1000) })
}

/**
 * Moves the clock to just after the start of a time step, so the real time that passes during a
 * test cannot carry "now" into the next step between computing a code and checking it.
 */
function alignToStep(clock: TestClock): void {
  const into = clock.now() % STEP_MS
  clock.advance(STEP_MS - into + 100)
}

eachBackend(httpBackends, 'admin MFA', (backend) => {
  let t: TestApp
  let sink: SmtpSink
  let close = async () => {}
  let access = ''
  let signedInAt = 0
  /** ev1's access token, signed in again once the moving clock brings it near its expiry. */
  const adminToken = async () => {
    if (t.clock.now() - signedInAt > 10 * 60_000) {
      access = (await login(t, 'ev1@example.com')).access_token
      signedInAt = t.clock.now()
    }
    return access
  }
  before(async () => {
    ;({ t, sink, close } = await startAppWithMail(backend))
    await t.seed(STANDARD_SEED)
  })
  after(async () => close())
  before(async () => {
    await adminToken()
  })

  const setup = async (token?: string) => {
    const res = await t.request({
      method: 'POST',
      url: '/admin/mfa/setup',
      token: token ?? (await adminToken()),
    })
    assert.equal(res.statusCode, 200, res.body)
    return res.json() as { secret: string; qr_uri: string }
  }
  const verify = async (code: string, token?: string) =>
    t.request({
      method: 'POST',
      url: '/admin/mfa/verify',
      token: token ?? (await adminToken()),
      payload: { code },
    })

  test('setup returns a 160-bit base32 secret and an otpauth URI an authenticator app scans', async () => {
    const { secret, qr_uri } = await setup()
    assert.match(secret, /^[A-Z2-7]{32}$/, '20 bytes of base32')
    const uri = new URL(qr_uri)
    assert.equal(uri.protocol, 'otpauth:')
    assert.equal(uri.host, 'totp')
    assert.equal(decodeURIComponent(uri.pathname), '/wristband:ev1@example.com')
    assert.equal(uri.searchParams.get('issuer'), 'wristband')
    assert.equal(uri.searchParams.get('secret'), secret)
    assert.equal(uri.searchParams.get('algorithm'), 'SHA1')
    assert.equal(uri.searchParams.get('digits'), '6')
    assert.equal(uri.searchParams.get('period'), '30')
  })

  test('each setup gives a new secret; the secret is stored sealed, never in plain text', async () => {
    const a = await setup()
    const b = await setup()
    assert.notEqual(a.secret, b.secret)
    const row = await t.db.db
      .selectFrom('administrators')
      .selectAll()
      .where('email', '=', 'ev1@example.com')
      .executeTakeFirstOrThrow()
    const stored = JSON.stringify(row)
    assert.ok(!stored.includes(b.secret) && !stored.includes(a.secret), 'secret stored in plain text')
    assert.match(row.mfa_pending_secret!, /^v1\./)
    assert.equal(row.mfa_secret, null, 'setup alone made a secret active')
  })

  test('verify before any code is accepted leaves MFA off; a wrong code is 400', async () => {
    await setup()
    const res = await verify('000000')
    // One in a million that 000000 is the right code; a second wrong code settles it.
    const res2 = res.statusCode === 400 ? res : await verify('999999')
    assert.equal(res2.statusCode, 400)
    assert.equal(typeof res2.json().detail, 'string')
    const me = await t.request({ method: 'GET', url: '/admin/me', token: await adminToken() })
    assert.equal(me.json().is_two_factor_authentication_enabled, false)
  })

  test('a code shorter or longer than 6 characters is 422', async () => {
    for (const code of ['12345', '1234567']) {
      const res = await verify(code)
      assert.equal(res.statusCode, 422)
      assert.equal(res.json().detail[0].loc.join('.'), 'body.code')
    }
    const extra = await t.request({
      method: 'POST',
      url: '/admin/mfa/verify',
      token: access,
      payload: { code: '123456', remember: true },
    })
    assert.equal(extra.statusCode, 422)
    assert.equal(extra.json().detail[0].type, 'extra_forbidden')
  })

  let active = ''
  test('a correct code switches MFA on, issues tokens with mfa_verified_at and e-mails the admin', async () => {
    const { secret } = await setup()
    alignToStep(t.clock)
    const now = t.clock.now()
    const res = await verify(codeAt(secret, now))
    assert.equal(res.statusCode, 200, res.body)
    const pair = res.json()
    assert.equal(pair.token_type, 'bearer')
    const claims = (await verifyToken(t, pair.access_token)).claims
    assert.equal(claims.type, 'access')
    assert.equal(claims.mfa_verified_at, Math.floor(now / 1000))
    const refreshed = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: pair.refresh_token },
    })
    assert.equal(refreshed.statusCode, 200, 'the refresh token of the pair is live')
    const me = await t.request({ method: 'GET', url: '/admin/me', token: await adminToken() })
    assert.equal(me.json().is_two_factor_authentication_enabled, true)
    const mail = await sink.waitFor('ev1@example.com', /Two-factor authentication enabled/)
    assert.ok(!mail.text?.includes(secret), 'secret in the e-mail')
    active = secret
  })

  test('the same code is refused the second time (replay)', async () => {
    const code = codeAt(active, t.clock.now())
    const res = await verify(code)
    assert.equal(res.statusCode, 400)
  })

  test('a code one step either side of now is accepted; two steps off is not', async () => {
    t.clock.advance(3 * STEP_MS)
    alignToStep(t.clock)
    const previous = await verify(codeAt(active, t.clock.now() - STEP_MS))
    assert.equal(previous.statusCode, 200, `previous step: ${previous.body}`)
    const next = await verify(codeAt(active, t.clock.now() + STEP_MS))
    assert.equal(next.statusCode, 200, `next step: ${next.body}`)

    t.clock.advance(5 * STEP_MS)
    alignToStep(t.clock)
    const now = t.clock.now()
    for (const offset of [-2, 2]) {
      const res = await verify(codeAt(active, now + offset * STEP_MS))
      assert.equal(res.statusCode, 400, `a code ${offset} steps off was accepted`)
    }
    const current = await verify(codeAt(active, now))
    assert.equal(current.statusCode, 200, current.body)
  })

  test('one code sent twice at once is accepted once', async () => {
    t.clock.advance(2 * STEP_MS)
    alignToStep(t.clock)
    const code = codeAt(active, t.clock.now())
    const statuses = (await Promise.all([verify(code), verify(code), verify(code)])).map((r) => r.statusCode)
    assert.deepEqual(statuses.sort(), [200, 400, 400])
  })

  test('a code from a step before the last accepted one is refused', async () => {
    t.clock.advance(5 * STEP_MS)
    alignToStep(t.clock)
    const now = t.clock.now()
    assert.equal((await verify(codeAt(active, now + STEP_MS))).statusCode, 200)
    assert.equal((await verify(codeAt(active, now))).statusCode, 400)
  })

  /** A token with a fresh mfa_verified_at, from a code of the active secret (re-enrolment needs one). */
  const freshToken = async () => {
    t.clock.advance(STEP_MS)
    alignToStep(t.clock)
    const res = await verify(codeAt(active, t.clock.now()))
    assert.equal(res.statusCode, 200, res.body)
    return res.json().access_token as string
  }

  test('a new secret stays pending: the active one keeps working until a code from the new one verifies', async () => {
    const fresh = await freshToken()
    const first = await setup(fresh)
    const second = await setup(fresh)
    t.clock.advance(3 * STEP_MS)
    alignToStep(t.clock)
    const now = t.clock.now()
    assert.equal(
      (await verify(codeAt(first.secret, now), fresh)).statusCode,
      400,
      'superseded pending secret',
    )
    assert.equal((await verify(codeAt(active, now))).statusCode, 200, 'active secret while pending')

    t.clock.advance(STEP_MS)
    const before = sink.to('ev1@example.com').length
    const switched = await verify(codeAt(second.secret, t.clock.now()), fresh)
    assert.equal(switched.statusCode, 200, switched.body)
    const mail = await sink.waitFor('ev1@example.com', /authenticator app was replaced/)
    assert.ok(sink.to('ev1@example.com').length > before)
    assert.ok(!mail.text?.includes(second.secret))

    t.clock.advance(STEP_MS)
    assert.equal((await verify(codeAt(active, t.clock.now()))).statusCode, 400, 'replaced secret')
    assert.equal((await verify(codeAt(second.secret, t.clock.now()))).statusCode, 200)
    active = second.secret
  })

  test('setup alone does not switch MFA off', async () => {
    await setup(await freshToken())
    t.clock.advance(STEP_MS)
    alignToStep(t.clock)
    assert.equal((await verify(codeAt(active, t.clock.now()))).statusCode, 200)
  })

  test('wrong codes beyond five lock the administrator out for a while, from any address', async () => {
    t.clock.advance(STEP_MS)
    alignToStep(t.clock)
    assert.equal((await verify(codeAt(active, t.clock.now()))).statusCode, 200, 'starts from a success')
    t.clock.advance(STEP_MS)
    const now = t.clock.now()
    const valid = new Set([-1, 0, 1].map((d) => codeAt(active, now + d * STEP_MS)))
    const wrong = ['000000', '111111', '222222', '333333'].find((c) => !valid.has(c))!
    for (let i = 1; i <= 6; i++) {
      const r = await verify(wrong)
      assert.equal(r.statusCode, 400, `wrong code ${i}: ${r.body}`)
    }
    const locked = await verify(codeAt(active, now))
    assert.equal(locked.statusCode, 429, 'the right code while locked')
    assert.ok(Number(locked.headers['retry-after']) >= 1)
    t.clock.advance(1_500)
    assert.equal((await verify(codeAt(active, now))).statusCode, 200, 'after the lock lapsed')
  })

  test('an administrator who never set up MFA gets 400 for any code', async () => {
    const root = (await login(t, 'root@example.com')).access_token
    const res = await verify('123456', root)
    assert.equal(res.statusCode, 400)
  })

  test('only administrators reach the MFA routes: 401 without a token, 403 for an operator', async () => {
    const none = await t.request({ method: 'POST', url: '/admin/mfa/setup' })
    assert.equal(none.statusCode, 401)
    assert.equal(none.headers['www-authenticate'], 'Bearer')
    const op = (await login(t, 'op@example.com', 'operator')).access_token
    assert.equal((await t.request({ method: 'POST', url: '/admin/mfa/setup', token: op })).statusCode, 403)
    assert.equal((await verify('123456', op)).statusCode, 403)
    const unauthenticated = await t.request({
      method: 'POST',
      url: '/admin/mfa/verify',
      payload: { code: 'x' },
    })
    assert.equal(unauthenticated.statusCode, 401, '401 comes before 422')
  })

  test('rate limits: setup 30 and verify 10 per minute per address', async () => {
    const token = await adminToken()
    await assertPerMinuteLimit(t, 30, () => ({ method: 'POST', url: '/admin/mfa/setup', token }))
    await assertPerMinuteLimit(t, 10, () => ({
      method: 'POST',
      url: '/admin/mfa/verify',
      token,
      payload: { code: 'short' },
    }))
  })
})
