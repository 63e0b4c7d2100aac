import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { eventAdmin, forEachBackend, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { cookieOf, postSignIn, postSignInCode } from '../../test/helpers/dashboard.js'
import { enrolMfa, nextCode } from '../../test/helpers/mfa.js'
import { BACKOFF_POLICY } from '../platform/backoff.js'

/**
 * Audit of 2026-11-25 (docs/security.md): an administrator whose MFA was enabled signed in to the
 * dashboard with the password alone. Now the password leads to a TOTP step, and only a code opens the
 * session, with the rules of `/admin/mfa/verify`: each code once, wrong codes on the administrator's one
 * back-off budget. Between the two steps the sign-in waits sealed in a cookie for five minutes.
 */
const ADMIN = 'dash-mfa@example.com'

forEachBackend(httpBackends, 'the dashboard sign-in asks for the second factor', (ctx) => {
  let t: TestApp
  let secret = ''
  before(async () => {
    t = ctx()
    await t.seed(
      withStandardSeed({ administrators: [eventAdmin(ADMIN), eventAdmin('dash-lock@example.com')] }),
    )
    secret = await enrolMfa(t, ADMIN)
  })

  /** The password step: its answer and the sealed sign-in it left in a cookie. */
  async function password(email = ADMIN) {
    const res = await postSignIn(t, email, 's3cret-pass')
    return { res, pending: cookieOf(res, 'wb_login_pending')?.value ?? '' }
  }
  const page = (url: string, session: string) =>
    t.request({ method: 'GET', url, cookies: { wb_session: session } })

  test('the dashboard asks an MFA administrator for a code', async () => {
    const { res, pending } = await password()
    assert.equal(res.statusCode, 303)
    assert.equal(res.headers.location, '/dashboard/login/code')
    assert.equal(cookieOf(res, 'wb_session'), undefined, 'the password alone opened a session')
    const cookie = cookieOf(res, 'wb_login_pending')!
    assert.equal(cookie.httpOnly, true)
    assert.equal(cookie.sameSite, 'Strict')
    assert.equal(cookie.path, '/dashboard/login')
    // Sealed: no part of it, decoded, names the account.
    for (const part of pending.split('.'))
      assert.doesNotMatch(Buffer.from(part, 'base64url').toString('latin1'), /admin|dash-mfa/)

    const step = await t.request({
      method: 'GET',
      url: '/dashboard/login/code',
      cookies: { wb_login_pending: pending },
    })
    assert.equal(step.statusCode, 200)
    assert.match(step.body, /name="code"[^>]*autocomplete="one-time-code"/)

    const wrong = await postSignInCode(t, pending, '000000')
    assert.equal(wrong.statusCode, 401)
    assert.equal(cookieOf(wrong, 'wb_session'), undefined)
    assert.match(wrong.body, /role="alert">Invalid code/)

    const ok = await postSignInCode(t, pending, nextCode(t, secret))
    assert.equal(ok.statusCode, 303, ok.body)
    assert.equal(ok.headers.location, '/dashboard')
    const session = cookieOf(ok, 'wb_session')!.value
    assert.equal((await page('/dashboard', session)).statusCode, 200)
    const audited = await t.db.db
      .selectFrom('audit_log')
      .select('detail')
      .where('kind', '=', 'dashboard_login')
      .where('outcome', '=', 'success')
      .orderBy('id', 'desc')
      .executeTakeFirstOrThrow()
    assert.deepEqual(JSON.parse(audited.detail ?? '{}'), { second_step: 'totp' })
  })

  test('a code is accepted once: the same code after another password step is refused', async () => {
    const first = await password()
    const code = nextCode(t, secret)
    assert.equal((await postSignInCode(t, first.pending, code)).statusCode, 303)
    const again = await password()
    const replay = await postSignInCode(t, again.pending, code)
    assert.equal(replay.statusCode, 401, 'a replayed code signed in')
    // A code used at /admin/mfa/verify is spent for the dashboard too, and the other way round.
    const apiCode = nextCode(t, secret)
    const { access_token } = await login(t, ADMIN)
    const verify = await t.request({
      method: 'POST',
      url: '/admin/mfa/verify',
      token: access_token,
      payload: { code: apiCode },
    })
    assert.equal(verify.statusCode, 200)
    assert.equal((await postSignInCode(t, again.pending, apiCode)).statusCode, 401)
  })

  test('the pending sign-in opens nothing by itself, and not once altered or expired', async () => {
    const { pending } = await password()
    // Used as a session cookie it is no session.
    const asSession = await page('/dashboard', pending)
    assert.equal(asSession.statusCode, 303)
    assert.equal(asSession.headers.location, '/dashboard/login')
    // Altered: the sign-in starts again, whatever the code.
    const parts = pending.split('.')
    const iv = parts[2]!
    parts[2] = `${iv.startsWith('A') ? 'B' : 'A'}${iv.slice(1)}`
    const altered = parts.join('.')
    const refused = await postSignInCode(t, altered, nextCode(t, secret))
    assert.equal(refused.statusCode, 401)
    assert.match(refused.body, /sign-in has expired/)
    // Expired: five minutes after the password.
    t.clock.advance(5 * 60_000 + 1000)
    const late = await postSignInCode(t, pending, nextCode(t, secret))
    assert.equal(late.statusCode, 401)
    assert.match(late.body, /sign-in has expired/)
    assert.equal(cookieOf(late, 'wb_session'), undefined)
  })

  test('without its CSRF token the code form is refused', async () => {
    const { pending } = await password()
    const res = await t.request({
      method: 'POST',
      url: '/dashboard/login/code',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      cookies: { wb_login_pending: pending },
      payload: new URLSearchParams({ code: nextCode(t, secret) }).toString(),
    })
    assert.equal(res.statusCode, 403)
    assert.equal(cookieOf(res, 'wb_session'), undefined)
  })

  test('wrong codes spend the back-off budget of /admin/mfa/verify', async () => {
    const lockSecret = await enrolMfa(t, 'dash-lock@example.com')
    const { pending } = await password('dash-lock@example.com')
    const right = nextCode(t, lockSecret)
    const wrong = right === '000000' ? '111111' : '000000'
    const { access_token } = await login(t, 'dash-lock@example.com')
    // The clock stands still, so the one-second lock the last failure starts cannot lapse on a slow machine.
    t.clock.freeze()
    try {
      for (let i = 0; i <= BACKOFF_POLICY.FREE_FAILURES; i++)
        assert.equal((await postSignInCode(t, pending, wrong)).statusCode, 401)
      const locked = await postSignInCode(t, pending, right)
      assert.equal(locked.statusCode, 429)
      assert.match(locked.body, /Too many attempts/)
      const api = await t.request({
        method: 'POST',
        url: '/admin/mfa/verify',
        token: access_token,
        payload: { code: right },
      })
      assert.equal(api.statusCode, 429, 'the API kept its own budget')
    } finally {
      t.clock.thaw()
    }
  })

  test('an administrator without MFA, and other accounts, sign in with the password alone', async () => {
    for (const name of ['ev1@example.com', 'partner1', 'nm@example.com']) {
      const res = await postSignIn(t, name, 's3cret-pass')
      assert.equal(res.statusCode, 303, name)
      assert.equal(res.headers.location, '/dashboard', name)
      assert.ok(cookieOf(res, 'wb_session'), name)
    }
  })
})
