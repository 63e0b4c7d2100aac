import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, nextAddress, STANDARD_SEED, type TestApp } from '../../../test/helpers/app.js'
import { httpBackends } from '../../../test/helpers/backends.js'
import { cookieOf, dashboardSession, formToken } from '../../../test/helpers/dashboard.js'
import { type RegisteredRoute, registeredRoutes } from '../../../test/helpers/routes.js'

/**
 * Every page is declared through the page kit (src/dashboard/kit/), so the rules it carries hold on
 * every page the app has, read from Fastify's route table: a new page that is not declared with the
 * kit, or not inside its context, fails here.
 */

/** The pages and forms; the assets, the page's JSON figures and the passkey options (JSON) are not pages. */
const isPage = (r: RegisteredRoute) =>
  r.url.startsWith('/dashboard') &&
  !r.url.startsWith('/dashboard/assets/') &&
  !r.url.startsWith('/dashboard/api/') &&
  !r.url.endsWith('/options')

/** Open without a session: the sign-in page and its steps. */
const SIGN_IN = '/dashboard/login'

/** The fields a form needs besides its CSRF token to pass its schema. */
const FIELDS: Record<string, Record<string, string>> = {
  '/dashboard/login': { username: 'someone', password: 'a-password' },
  '/dashboard/login/code': { code: '123456' },
  '/dashboard/login/passkey': { response: '{}' },
  '/dashboard/passkeys': { response: '{}' },
}

/** A path with its parameters filled in (1: the seed's event, device and so on). */
const urlOf = (r: RegisteredRoute) => r.url.replace(/:[a-z_]+/g, '1')

forEachBackend(httpBackends, 'the dashboard page kit', (ctx) => {
  let t: TestApp
  let session: string
  let routes: RegisteredRoute[]
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    session = await dashboardSession(t, 'ev1@example.com')
    routes = registeredRoutes(t.app).filter(isPage)
  })

  test('every page without a session goes to sign-in, with the pages’ CSP and no caching', async () => {
    const pages = routes.filter((r) => r.method === 'GET')
    assert.ok(pages.length >= 8, `pages found: ${pages.map((r) => r.url).join(' ')}`)
    for (const r of pages) {
      const res = await t.request({ method: 'GET', url: urlOf(r) })
      const what = `GET ${r.url}: ${res.statusCode}`
      if (r.url === SIGN_IN) assert.equal(res.statusCode, 200, what)
      else {
        assert.equal(res.statusCode, 303, what)
        assert.equal(res.headers.location, SIGN_IN, what)
      }
      assert.match(
        String(res.headers['content-security-policy']),
        /^default-src 'none'; script-src 'self'/,
        what,
      )
      assert.equal(res.headers['cache-control'], 'no-store', what)
    }
  })

  test('every form refuses a wrong CSRF token with a page (403), signed in or not', async () => {
    const forms = routes.filter((r) => r.method === 'POST')
    assert.ok(forms.length >= 8, `forms found: ${forms.map((r) => r.url).join(' ')}`)
    for (const r of forms) {
      const res = await t.request({
        method: 'POST',
        url: urlOf(r),
        cookies: { wb_session: session, wb_login_csrf: 'the-cookie-token' },
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ ...FIELDS[r.url], csrf_token: 'another-token' }).toString(),
      })
      const what = `POST ${r.url}: ${res.statusCode} ${res.body.slice(0, 200)}`
      assert.equal(res.statusCode, 403, what)
      assert.match(String(res.headers['content-type']), /^text\/html/, what)
    }
  })

  test('a path value refused by its schema is the 422 page, signed in', async () => {
    const res = await t.request({
      method: 'GET',
      url: '/dashboard/events/first/devices',
      cookies: { wb_session: session },
    })
    assert.equal(res.statusCode, 422)
    assert.match(res.body, /<h1>Invalid request<\/h1>/)
  })

  test('the sign-in forms answer their refusals with themselves: an invalid form, too many attempts', async () => {
    const invalid = await t.request({
      method: 'POST',
      url: '/dashboard/login/code',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'code=12&csrf_token=x',
    })
    assert.equal(invalid.statusCode, 400)
    assert.match(invalid.body, /Enter the 6-digit code from your authenticator app\./)
    assert.match(invalid.body, /<form method="post" action="\/dashboard\/login\/code"/)

    // One address past the sign-in form's budget (10 a minute): the form, then the form saying so.
    const headers = { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': nextAddress() }
    const first = await t.request({ method: 'POST', url: SIGN_IN, headers, payload: 'username=a' })
    assert.equal(first.statusCode, 400)
    assert.match(first.body, /Enter your username and password\./)
    assert.match(first.body, /name="username"[^>]* value="a"/)
    let last = first
    for (let i = 0; i < 10 && last.statusCode !== 429; i++)
      last = await t.request({ method: 'POST', url: SIGN_IN, headers, payload: 'username=a' })
    assert.equal(last.statusCode, 429)
    assert.match(last.body, /Too many attempts\. Wait a minute and try again\./)
    assert.match(last.body, /<form method="post" action="\/dashboard\/login" class="stack">/)
  })
  test('every form with its right CSRF token is not refused for it: the 403 above is the token’s', async () => {
    // A form whose 403 came from something else (a viewer without access, a field its schema wants)
    // would pass the test above without checking any token; with the right one it must get past the check.
    const own = await dashboardSession(t, 'ev1@example.com')
    const csrf = formToken(
      (await t.request({ method: 'GET', url: '/dashboard', cookies: { wb_session: own } })).body,
    )
    const signIn = await t.request({ method: 'GET', url: SIGN_IN })
    const loginCsrf = cookieOf(signIn, 'wb_login_csrf')!.value
    const forms = routes.filter((r) => r.method === 'POST')
    // Signing out last: it ends the session the other forms use.
    forms.sort((a, b) => Number(a.url.endsWith('/logout')) - Number(b.url.endsWith('/logout')))
    for (const r of forms) {
      const signInForm = r.url.startsWith(SIGN_IN)
      const res = await t.request({
        method: 'POST',
        url: urlOf(r),
        cookies: signInForm ? { wb_login_csrf: loginCsrf } : { wb_session: own },
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': nextAddress() },
        payload: new URLSearchParams({
          ...FIELDS[r.url],
          csrf_token: signInForm ? formToken(signIn.body) : csrf,
        }).toString(),
      })
      assert.notEqual(res.statusCode, 403, `POST ${r.url}: ${res.statusCode} ${res.body.slice(0, 300)}`)
    }
  })
})
