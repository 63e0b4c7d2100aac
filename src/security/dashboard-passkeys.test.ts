import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { forEachBackend, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import type { SoftAuthenticator } from '../../test/helpers/authenticator.js'
import { backends } from '../../test/helpers/backends.js'
import { cookieOf, dashboardSession, formToken } from '../../test/helpers/dashboard.js'
import { auditOf, PASSKEY_ENV, softAuthenticator } from '../../test/helpers/passkeys.js'

/**
 * The dashboard's passkeys through HTTP as a browser sends them, for a dashboard user, who
 * has no TOTP: the first passkey needs the password's session and the password with the answer
 * (docs/security.md, "The first passkey and the owner's recovery"), a passkey alone signs in, and
 * once the account has one a password-only session neither adds nor removes one. Options need the CSRF
 * token; the flow is a cookie, answered once; a dashboard user's passkey opens no API session.
 */
const USER = 'partner1'
const FORM = { 'content-type': 'application/x-www-form-urlencoded' }

forEachBackend(
  backends,
  "dashboard passkeys: a dashboard user's own",
  (ctx) => {
    let t: TestApp
    const key: SoftAuthenticator = softAuthenticator()
    before(async () => {
      t = ctx()
      await t.seed(withStandardSeed({}))
    })

    const count = async () => (await t.db.db.selectFrom('passkeys').select('id').execute()).length

    /** The passkeys page's options and form, with a session: the form's answer. */
    async function addPasskey(
      session: string,
      name = 'Phone',
      authenticator = key,
    ): Promise<LightMyRequestResponse> {
      const page = await t.request({
        method: 'GET',
        url: '/dashboard/passkeys',
        cookies: { wb_session: session },
      })
      assert.equal(page.statusCode, 200, page.body)
      const csrf = formToken(page.body)
      const opts = await t.request({
        method: 'POST',
        url: '/dashboard/passkeys/options',
        headers: { 'x-csrf-token': csrf },
        cookies: { wb_session: session },
      })
      if (opts.statusCode !== 200) return opts
      const flow = cookieOf(opts, 'wb_passkey_flow')!
      assert.equal(flow.httpOnly, true)
      assert.equal(flow.path, '/dashboard/passkeys')
      const response = authenticator.register(opts.json().options)
      return t.request({
        method: 'POST',
        url: '/dashboard/passkeys',
        headers: FORM,
        cookies: { wb_session: session, wb_passkey_flow: flow.value },
        payload: new URLSearchParams({
          csrf_token: csrf,
          name,
          response: JSON.stringify(response),
          // The account's password: a first passkey needs it (every test account has this one).
          password: 's3cret-pass',
        }).toString(),
      })
    }

    /** The sign-in page's passkey button: options, then the form with the authenticator's answer. */
    async function signInWithPasskey(
      answer = (options: { challenge: string }): string => JSON.stringify(key.assert(options)),
    ) {
      const page = await t.request({ method: 'GET', url: '/dashboard/login' })
      const loginCsrf = cookieOf(page, 'wb_login_csrf')!.value
      const csrf = formToken(page.body)
      const opts = await t.request({
        method: 'POST',
        url: '/dashboard/login/passkey/options',
        headers: { 'x-csrf-token': csrf },
        cookies: { wb_login_csrf: loginCsrf },
      })
      assert.equal(opts.statusCode, 200, opts.body)
      const flow = cookieOf(opts, 'wb_passkey_flow')!.value
      const post = () =>
        t.request({
          method: 'POST',
          url: '/dashboard/login/passkey',
          headers: FORM,
          cookies: { wb_login_csrf: loginCsrf, wb_passkey_flow: flow },
          payload: new URLSearchParams({
            csrf_token: csrf,
            response: answer(opts.json().options),
          }).toString(),
        })
      return { res: await post(), again: post }
    }

    test("the password's session adds the first passkey, which alone then signs in", async () => {
      const session = await dashboardSession(t, USER)
      const added = await addPasskey(session)
      assert.equal(added.statusCode, 303, added.body)
      assert.equal(added.headers.location, '/dashboard/passkeys?added=1')
      assert.equal(await count(), 1)
      const { res, again } = await signInWithPasskey()
      assert.equal(res.statusCode, 303, res.body)
      assert.equal(res.headers.location, '/dashboard')
      const opened = cookieOf(res, 'wb_session')!.value
      assert.equal(
        (await t.request({ method: 'GET', url: '/dashboard', cookies: { wb_session: opened } })).statusCode,
        200,
      )
      // The flow was answered: the same form again is refused, without a session.
      const replay = await again()
      assert.equal(replay.statusCode, 401)
      assert.equal(cookieOf(replay, 'wb_session'), undefined)
      assert.equal((await auditOf(t, 'passkey_sign_in', 'unknown')).at(-1)?.detail.reason, 'challenge')
    })

    test('once the account has a passkey, a password-only session neither adds nor removes one', async () => {
      const passwordOnly = await dashboardSession(t, USER)
      const refused = await addPasskey(passwordOnly, 'Stolen')
      assert.equal(refused.statusCode, 403)
      const id = (await t.db.db.selectFrom('passkeys').select('id').executeTakeFirstOrThrow()).id
      const page = await t.request({
        method: 'GET',
        url: '/dashboard/passkeys',
        cookies: { wb_session: passwordOnly },
      })
      const remove = await t.request({
        method: 'POST',
        url: `/dashboard/passkeys/${id}/delete`,
        headers: FORM,
        cookies: { wb_session: passwordOnly },
        payload: new URLSearchParams({ csrf_token: formToken(page.body) }).toString(),
      })
      assert.equal(remove.statusCode, 403)
      assert.match(remove.body, /needs a recent second factor/)
      assert.equal(await count(), 1)
      const denials = (await auditOf(t, 'mfa_required')).filter((e) => e.actor?.startsWith('dashboard_user:'))
      assert.equal(denials.length, 2)

      // The passkey's session may.
      const { res } = await signInWithPasskey()
      const fresh = cookieOf(res, 'wb_session')!.value
      const freshPage = await t.request({
        method: 'GET',
        url: '/dashboard/passkeys',
        cookies: { wb_session: fresh },
      })
      const removed = await t.request({
        method: 'POST',
        url: `/dashboard/passkeys/${id}/delete`,
        headers: FORM,
        cookies: { wb_session: fresh },
        payload: new URLSearchParams({ csrf_token: formToken(freshPage.body) }).toString(),
      })
      assert.equal(removed.statusCode, 303)
      assert.equal(await count(), 0)
      assert.equal((await auditOf(t, 'passkey_removed')).length, 1)
    })

    test("options need the form's CSRF token; a bad answer is a 4xx page that changes nothing", async () => {
      const session = await dashboardSession(t, USER)
      const noCsrf = await t.request({
        method: 'POST',
        url: '/dashboard/passkeys/options',
        cookies: { wb_session: session },
      })
      assert.equal(noCsrf.statusCode, 403)
      const signInNoCsrf = await t.request({ method: 'POST', url: '/dashboard/login/passkey/options' })
      assert.equal(signInNoCsrf.statusCode, 403)
      for (const answer of ['not json', '{"id":1}', '[]', '{"id":"x","type":"public-key","response":{}}']) {
        const { res } = await signInWithPasskey(() => answer)
        assert.ok(res.statusCode >= 400 && res.statusCode < 500, `${answer}: ${res.statusCode}`)
        assert.equal(cookieOf(res, 'wb_session'), undefined)
      }
    })

    test("a dashboard user's passkey opens no API session", async () => {
      const session = await dashboardSession(t, USER)
      assert.equal((await addPasskey(session, 'Again')).statusCode, 303)
      const opts = await t.request({ method: 'POST', url: '/auth/passkey/options' })
      const res = await t.request({
        method: 'POST',
        url: '/auth/passkey',
        payload: {
          flow: opts.json().flow,
          response: key.assert(opts.json().options, { credential: key.credentials.at(-1)! }),
        },
      })
      assert.equal(res.statusCode, 401)
      const refusals = await auditOf(t, 'passkey_sign_in')
      assert.equal(refusals.at(-1)?.detail.reason, 'account')
    })

    test("a network manager's passkey, added on the dashboard, signs in at the API as the network manager", async () => {
      const nmKey = softAuthenticator()
      const session = await dashboardSession(t, 'nm@example.com')
      const added = await addPasskey(session, 'NM laptop', nmKey)
      assert.equal(added.statusCode, 303, added.body)
      const opts = await t.request({ method: 'POST', url: '/auth/passkey/options' })
      const res = await t.request({
        method: 'POST',
        url: '/auth/passkey',
        payload: { flow: opts.json().flow, response: nmKey.assert(opts.json().options) },
      })
      assert.equal(res.statusCode, 200, res.body)
      const claims = (
        await t.request({
          method: 'POST',
          url: '/tokens/verify',
          payload: { token: res.json().access_token },
        })
      ).json().claims
      assert.equal(claims.role, 'network_manager')
      assert.equal(typeof claims.mfa_verified_at, 'number')
      await t.db.db.deleteFrom('passkeys').where('subject_kind', '=', 'network_manager').execute()
    })

    test("removing a dashboard user removes the user's passkeys", async () => {
      assert.equal(await count(), 1)
      const user = await t.db.db
        .selectFrom('dashboard_users')
        .select('id')
        .where('username', '=', USER)
        .executeTakeFirstOrThrow()
      const res = await t.request({
        method: 'DELETE',
        url: `/admin/dashboard-users/${user.id}`,
        token: (await login(t, 'root@example.com')).access_token,
      })
      assert.equal(res.statusCode, 200, res.body)
      assert.equal(await count(), 0)
    })
  },
  PASSKEY_ENV,
)
