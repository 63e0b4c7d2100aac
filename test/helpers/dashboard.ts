import type { LightMyRequestResponse } from 'fastify'
import type { TestApp } from './app.js'

/** The CSRF token of the first form on a page. */
export function formToken(html: string): string {
  const m = /name="csrf_token" value="([^"]+)"/.exec(html)
  if (!m) throw new Error('no csrf_token field on the page')
  return m[1]!
}

export function cookieOf(res: LightMyRequestResponse, name: string) {
  return res.cookies.find((c) => c.name === name)
}

/** Posts the sign-in form as a browser would (token from the page, cookie from the response). */
export async function postSignIn(
  t: TestApp,
  username: string,
  password: string,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  const page = await t.request({ method: 'GET', url: '/dashboard/login', headers })
  const loginCsrf = cookieOf(page, 'wb_login_csrf')
  if (!loginCsrf) throw new Error('the sign-in page set no CSRF cookie')
  return t.request({
    method: 'POST',
    url: '/dashboard/login',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    cookies: { wb_login_csrf: loginCsrf.value },
    payload: new URLSearchParams({ username, password, csrf_token: formToken(page.body) }).toString(),
  })
}

/** Signs in and returns the session cookie value. */
export async function dashboardSession(
  t: TestApp,
  username: string,
  password = 's3cret-pass',
): Promise<string> {
  const res = await postSignIn(t, username, password)
  const session = cookieOf(res, 'wb_session')
  if (res.statusCode !== 303 || !session) throw new Error(`sign-in of ${username} failed: ${res.statusCode}`)
  return session.value
}

/**
 * Posts the TOTP step's form as a browser would after `postSignIn` answered with it: the step's page
 * first (its CSRF cookie and token), with the cookie holding the sealed sign-in.
 */
export async function postSignInCode(
  t: TestApp,
  pending: string,
  code: string,
): Promise<LightMyRequestResponse> {
  const page = await t.request({
    method: 'GET',
    url: '/dashboard/login/code',
    cookies: { wb_login_pending: pending },
  })
  const loginCsrf = cookieOf(page, 'wb_login_csrf')
  if (page.statusCode !== 200 || !loginCsrf)
    throw new Error(`the code step's page answered ${page.statusCode}`)
  return t.request({
    method: 'POST',
    url: '/dashboard/login/code',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    cookies: { wb_login_pending: pending, wb_login_csrf: loginCsrf.value },
    payload: new URLSearchParams({ code, csrf_token: formToken(page.body) }).toString(),
  })
}
