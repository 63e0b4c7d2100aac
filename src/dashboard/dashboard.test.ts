import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { cookieOf, dashboardSession, formToken, postSignIn } from '../../test/helpers/dashboard.js'
import { sha256Hex } from '../platform/digest.js'

const FORM = { 'content-type': 'application/x-www-form-urlencoded' }

forEachBackend(httpBackends, 'dashboard sign-in and sessions', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    // partner1 (event 1) comes with the standard seed.
    await t.seed(
      withStandardSeed({
        dashboard_users: [
          { username: 'partner2', password: 's3cret-pass', event_ids: [2] },
          { username: 'backoff-user', password: 's3cret-pass', event_ids: [1] },
          { username: 'narrowed', password: 's3cret-pass', event_ids: [1, 2] },
        ],
      }),
    )
  })

  test('the sign-in page carries a strict CSP with no inline script', async () => {
    const res = await t.request({ method: 'GET', url: '/dashboard/login' })
    assert.equal(res.statusCode, 200)
    assert.match(String(res.headers['content-type']), /^text\/html/)
    const csp = String(res.headers['content-security-policy'])
    const scriptSrc = csp.split(';').find((d) => d.trim().startsWith('script-src'))
    assert.equal(scriptSrc?.trim(), "script-src 'self'")
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/)
    assert.match(csp, /default-src 'none'/)
    assert.match(csp, /frame-ancestors 'none'/)
    assert.doesNotMatch(res.body, /<script(?![^>]*\bsrc=)/, 'an inline script on the page')
  })

  test('a dashboard user signs in; the session cookie is HttpOnly, SameSite=Strict and stored hashed', async () => {
    const res = await postSignIn(t, 'partner1', 's3cret-pass')
    assert.equal(res.statusCode, 303)
    assert.equal(res.headers.location, '/dashboard')
    const cookie = cookieOf(res, 'wb_session')
    assert.ok(cookie)
    assert.equal(cookie.httpOnly, true)
    assert.equal(cookie.sameSite, 'Strict')
    assert.equal(cookie.path, '/dashboard')
    assert.notEqual(cookie.secure, true, 'Secure over plain HTTP would lose the cookie')
    const rows = await t.db.db.selectFrom('dashboard_sessions').select(['token_hash']).execute()
    assert.ok(rows.some((r) => r.token_hash === sha256Hex(cookie.value)))
    assert.ok(rows.every((r) => r.token_hash !== cookie.value))
    const list = await t.request({
      method: 'GET',
      url: '/dashboard',
      cookies: { wb_session: cookie.value },
    })
    assert.equal(list.statusCode, 200)
    assert.match(list.body, /Summer Fest/)
    assert.doesNotMatch(list.body, /Winter Fest/)
  })

  test('the cookie is Secure when the request came over HTTPS', async () => {
    const res = await postSignIn(t, 'partner1', 's3cret-pass', { 'x-forwarded-proto': 'https' })
    assert.equal(res.statusCode, 303)
    assert.equal(cookieOf(res, 'wb_session')?.secure, true)
  })

  test('administrators and network managers sign in with their e-mail', async () => {
    for (const name of ['root@example.com', 'ev1@example.com', 'nm@example.com']) {
      const res = await postSignIn(t, name, 's3cret-pass')
      assert.equal(res.statusCode, 303, name)
    }
    const root = await dashboardSession(t, 'root@example.com')
    const list = await t.request({ method: 'GET', url: '/dashboard', cookies: { wb_session: root } })
    assert.match(list.body, /Summer Fest/)
    assert.match(list.body, /Winter Fest/)
    // Operators have no dashboard.
    assert.equal((await postSignIn(t, 'op@example.com', 's3cret-pass')).statusCode, 401)
  })

  test('a wrong password shows the form again with an error and opens no session', async () => {
    const res = await postSignIn(t, 'partner1', 'wrong-password')
    assert.equal(res.statusCode, 401)
    assert.match(res.body, /Incorrect username or password/)
    assert.equal(cookieOf(res, 'wb_session'), undefined)
    const unknown = await postSignIn(t, 'nobody', 'wrong-password')
    assert.equal(unknown.statusCode, 401)
    assert.match(unknown.body, /Incorrect username or password/)
  })

  test('a sign-in POST without the CSRF token or cookie is refused', async () => {
    const page = await t.request({ method: 'GET', url: '/dashboard/login' })
    const token = formToken(page.body)
    const noToken = await t.request({
      method: 'POST',
      url: '/dashboard/login',
      headers: FORM,
      cookies: { wb_login_csrf: cookieOf(page, 'wb_login_csrf')!.value },
      payload: 'username=partner1&password=s3cret-pass',
    })
    assert.equal(noToken.statusCode, 403)
    assert.equal(cookieOf(noToken, 'wb_session'), undefined)
    const noCookie = await t.request({
      method: 'POST',
      url: '/dashboard/login',
      headers: FORM,
      payload: new URLSearchParams({
        username: 'partner1',
        password: 's3cret-pass',
        csrf_token: token,
      }).toString(),
    })
    assert.equal(noCookie.statusCode, 403)
    assert.equal(cookieOf(noCookie, 'wb_session'), undefined)
  })

  test('sign-out needs the session CSRF token and ends the session', async () => {
    const session = await dashboardSession(t, 'partner1')
    const page = await t.request({
      method: 'GET',
      url: '/dashboard',
      cookies: { wb_session: session },
    })
    const token = formToken(page.body)
    const other = await dashboardSession(t, 'partner1')
    const otherToken = formToken(
      (await t.request({ method: 'GET', url: '/dashboard', cookies: { wb_session: other } })).body,
    )
    assert.notEqual(token, otherToken, 'CSRF tokens are per session')

    const missing = await t.request({
      method: 'POST',
      url: '/dashboard/logout',
      headers: FORM,
      cookies: { wb_session: session },
      payload: '',
    })
    assert.equal(missing.statusCode, 403)
    const foreign = await t.request({
      method: 'POST',
      url: '/dashboard/logout',
      headers: FORM,
      cookies: { wb_session: session },
      payload: `csrf_token=${encodeURIComponent(otherToken)}`,
    })
    assert.equal(foreign.statusCode, 403)
    const still = await t.request({
      method: 'GET',
      url: '/dashboard',
      cookies: { wb_session: session },
    })
    assert.equal(still.statusCode, 200, 'a refused sign-out left the session alive')

    const out = await t.request({
      method: 'POST',
      url: '/dashboard/logout',
      headers: FORM,
      cookies: { wb_session: session },
      payload: `csrf_token=${encodeURIComponent(token)}`,
    })
    assert.equal(out.statusCode, 303)
    assert.equal(out.headers.location, '/dashboard/login')
    const after = await t.request({
      method: 'GET',
      url: '/dashboard',
      cookies: { wb_session: session },
    })
    assert.equal(after.statusCode, 303)
    assert.equal(after.headers.location, '/dashboard/login')
  })

  test('pages without a session go to sign-in; the JSON answers 401', async () => {
    const page = await t.request({ method: 'GET', url: '/dashboard/events/1' })
    assert.equal(page.statusCode, 303)
    assert.equal(page.headers.location, '/dashboard/login')
    const json = await t.request({ method: 'GET', url: '/dashboard/api/events/1/stats' })
    assert.equal(json.statusCode, 401)
    const forged = await t.request({
      method: 'GET',
      url: '/dashboard/api/events/1/stats',
      cookies: { wb_session: 'not-a-session' },
    })
    assert.equal(forged.statusCode, 401)
  })

  test('a session expires after two idle hours', async () => {
    const session = await dashboardSession(t, 'partner1')
    t.clock.advance(2 * 60 * 60_000 + 1)
    const res = await t.request({ method: 'GET', url: '/dashboard', cookies: { wb_session: session } })
    assert.equal(res.statusCode, 303)
  })

  test('a narrowed event list applies to open sessions at once', async () => {
    const session = await dashboardSession(t, 'narrowed')
    const url = '/dashboard/api/events/2/stats'
    assert.equal((await t.request({ method: 'GET', url, cookies: { wb_session: session } })).statusCode, 200)
    await t.db.db
      .updateTable('dashboard_users')
      .set({ event_ids: '1' })
      .where('username', '=', 'narrowed')
      .execute()
    assert.equal((await t.request({ method: 'GET', url, cookies: { wb_session: session } })).statusCode, 403)
  })

  test('sign-in is limited to 10 per minute per address', async () => {
    const ip = { 'x-forwarded-for': '192.0.2.77' }
    const statuses: number[] = []
    for (let i = 0; i < 11; i++) {
      const res = await t.request({
        method: 'POST',
        url: '/dashboard/login',
        headers: { ...FORM, ...ip },
        payload: 'username=x&password=y',
      })
      statuses.push(res.statusCode)
    }
    assert.deepEqual(statuses.slice(0, 10), Array(10).fill(403))
    assert.equal(statuses[10], 429)
  })

  test('failed passwords back off per account, whatever the address', async () => {
    for (let i = 0; i < 6; i++) assert.equal((await postSignIn(t, 'backoff-user', 'wrong')).statusCode, 401)
    const locked = await postSignIn(t, 'backoff-user', 's3cret-pass')
    assert.equal(locked.statusCode, 429)
    assert.ok(Number(locked.headers['retry-after']) >= 1)
    assert.equal(cookieOf(locked, 'wb_session'), undefined)
  })
})

forEachBackend(httpBackends, 'event figures: who may see them', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    // partner1 (event 1) comes with the standard seed.
    await t.seed(
      withStandardSeed({
        dashboard_users: [{ username: 'partner2', password: 's3cret-pass', event_ids: [2] }],
      }),
    )
  })

  test("a dashboard user cannot see another event's figures, through the page or the JSON", async () => {
    const session = await dashboardSession(t, 'partner1')
    const cookies = { wb_session: session }
    const own = await t.request({ method: 'GET', url: '/dashboard/events/1', cookies })
    assert.equal(own.statusCode, 200)
    assert.match(own.body, /Summer Fest/)
    assert.match(own.body, /data-stats-url="\/dashboard\/api\/events\/1\/stats"/)
    const ownJson = await t.request({ method: 'GET', url: '/dashboard/api/events/1/stats', cookies })
    assert.equal(ownJson.statusCode, 200)
    assert.equal(ownJson.json().event.uid, 'summer-fest-2026')

    const otherPage = await t.request({ method: 'GET', url: '/dashboard/events/2', cookies })
    assert.equal(otherPage.statusCode, 403)
    assert.doesNotMatch(otherPage.body, /Winter Fest|winter-fest/)
    const otherJson = await t.request({ method: 'GET', url: '/dashboard/api/events/2/stats', cookies })
    assert.equal(otherJson.statusCode, 403)
    assert.doesNotMatch(otherJson.body, /Winter Fest|winter-fest/)
    // An event that does not exist looks the same as one that is not yours.
    const missing = await t.request({ method: 'GET', url: '/dashboard/api/events/999/stats', cookies })
    assert.equal(missing.statusCode, 403)
  })

  test('the event page loads its script and styles from the service, with no inline script', async () => {
    const session = await dashboardSession(t, 'partner1')
    const page = await t.request({
      method: 'GET',
      url: '/dashboard/events/1',
      cookies: { wb_session: session },
    })
    assert.doesNotMatch(String(page.headers['content-security-policy']), /unsafe-inline/)
    const srcs = [...page.body.matchAll(/<script src="([^"]+)"/g)].map((m) => m[1]!)
    assert.deepEqual(srcs, ['/dashboard/assets/uplot/uPlot.iife.min.js', '/dashboard/assets/dashboard.js'])
    assert.doesNotMatch(page.body, /<script(?![^>]*\bsrc=)/)
    for (const src of [...srcs, '/dashboard/assets/uplot/uPlot.min.css', '/dashboard/assets/dashboard.css']) {
      const asset = await t.request({ method: 'GET', url: src })
      assert.equal(asset.statusCode, 200, src)
      assert.ok(asset.body.length > 500, src)
    }
  })

  test('GET /events/{id}/stats needs reports:read on that event', async () => {
    const admin = await login(t, 'ev1@example.com')
    const ok = await t.request({ method: 'GET', url: '/events/1/stats', token: admin.access_token })
    assert.equal(ok.statusCode, 200)
    assert.equal(ok.json().event.id, 1)
    const other = await t.request({ method: 'GET', url: '/events/2/stats', token: admin.access_token })
    assert.equal(other.statusCode, 403)
    assert.doesNotMatch(other.body, /winter/i)

    const nm = await login(t, 'nm@example.com', 'network_manager')
    assert.equal(
      (await t.request({ method: 'GET', url: '/events/1/stats', token: nm.access_token })).statusCode,
      200,
    )
    const op = await login(t, 'op@example.com', 'operator')
    assert.equal(
      (await t.request({ method: 'GET', url: '/events/1/stats', token: op.access_token })).statusCode,
      403,
    )

    const root = await login(t, 'root@example.com')
    assert.equal(
      (await t.request({ method: 'GET', url: '/events/2/stats', token: root.access_token })).statusCode,
      200,
    )
    assert.equal(
      (await t.request({ method: 'GET', url: '/events/999/stats', token: root.access_token })).statusCode,
      404,
    )

    const none = await t.request({ method: 'GET', url: '/events/1/stats' })
    assert.equal(none.statusCode, 401)
    assert.equal(none.headers['www-authenticate'], 'Bearer')
    const bad = await t.request({ method: 'GET', url: '/events/1/stats?range=5y', token: admin.access_token })
    assert.equal(bad.statusCode, 422)
  })
})
