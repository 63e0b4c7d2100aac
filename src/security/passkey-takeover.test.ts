import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import {
  eventAdmin,
  login,
  startApp,
  type TestApp,
  verifyToken,
  withStandardSeed,
} from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { cliEnv, ok, wristband } from '../../test/helpers/cli.js'
import { cookieOf, dashboardSession, formToken } from '../../test/helpers/dashboard.js'
import {
  auditOf,
  PASSKEY_ENV,
  passkeySignIn,
  registerPasskey,
  softAuthenticator,
} from '../../test/helpers/passkeys.js'
import { SmtpSink } from '../../test/helpers/smtp-sink.js'
import { until } from '../../test/helpers/until.js'

/**
 * F1 of the third audit (docs/security.md, "Third audit"): someone who learned an administrator's
 * password registered a passkey (the fresh-MFA guard let a password sign-in add the first one), the
 * passkey survived the owner's password reset by e-mail, nobody was told, and the intruder signed in
 * with it afterwards. Now the first passkey needs the password with the request (a session or token
 * alone adds none), the owner is e-mailed when a passkey is added or removed and when a password reset
 * leaves passkeys in place, and `wristband admin reset-passkeys` ends the intruder's passkey and every
 * token it gave (the recovery story of docs/security.md).
 */
const OWNER = 'owner-f1@example.com'
const PASSWORD = 's3cret-pass'

eachBackend(httpBackends, 'F1: a password alone can lock the owner out', (backend) => {
  let p: ProvisionedBackend
  let t: TestApp
  const sink = new SmtpSink()
  before(async () => {
    await sink.start()
    p = await backend.provision()
    t = await startApp(backend, { ...PASSKEY_ENV, SMTP_URL: sink.url, JOBS_POLL_MS: '50' }, p)
    await t.seed(withStandardSeed({ administrators: [eventAdmin(OWNER)] }))
  })
  after(async () => {
    await t?.close()
    await p?.dispose()
    await sink.stop()
  })

  const mails = (subject: RegExp) => sink.to(OWNER).filter((m) => subject.test(m.subject ?? ''))
  const waitMail = async (subject: RegExp, count = 1) => {
    await until(`${count} mail(s) ${subject} to the owner`, async () => mails(subject).length >= count)
    return mails(subject).at(-1)!
  }

  test('the intruder needs the password to add the first passkey; the owner is told and recovers', async () => {
    const intruder = softAuthenticator()
    // A session alone (a laptop left open, a token read from a log) adds no first passkey.
    const stolen = (await login(t, OWNER)).access_token
    const bare = await registerPasskey(t, stolen, softAuthenticator(), {}, 'Intruder', null)
    assert.equal(bare.statusCode, 400, bare.body)
    assert.match(bare.json().detail, /password/)
    const wrong = await registerPasskey(t, stolen, softAuthenticator(), {}, 'Intruder', 'not-the-password')
    assert.equal(wrong.statusCode, 400, wrong.body)
    assert.equal((await t.db.db.selectFrom('passkeys').select('id').execute()).length, 0)

    // Whoever knows the password adds one; the owner hears of it at once.
    const added = await registerPasskey(t, stolen, intruder, {}, 'Intruder', PASSWORD)
    assert.equal(added.statusCode, 201, added.body)
    assert.match((await waitMail(/A passkey was added/)).text ?? '', /"Intruder"[\s\S]*reset-passkeys/)

    // The owner resets the password by e-mail: the passkey stays, and the notice says so and what to do.
    const sent = await t.request({
      method: 'POST',
      url: '/admin/password-reset/email-send',
      payload: { email: OWNER },
    })
    assert.equal(sent.statusCode, 200)
    const link = /\/admin\/password-reset\/([A-Za-z0-9_-]+)/.exec(
      (await waitMail(/Reset your wristband password/)).text ?? '',
    )![1]!
    const reset = await t.request({
      method: 'POST',
      url: `/admin/password-reset/${link}`,
      payload: { new_password: 'owner-new-pass' },
    })
    assert.equal(reset.statusCode, 200, reset.body)
    assert.match(
      (await waitMail(/Your wristband password was changed/)).text ?? '',
      /passkey stays registered[\s\S]*wristband admin reset-passkeys/,
    )
    const signedIn = await passkeySignIn(t, intruder)
    assert.equal(
      signedIn.statusCode,
      200,
      `a reset by e-mail keeps passkeys (the notice told the owner): ${signedIn.body} ${JSON.stringify((await auditOf(t, 'passkey_sign_in')).at(-1))}`,
    )
    const intruderToken = signedIn.json().access_token as string

    // The recovery: the platform administrator removes every passkey of the account.
    ok(await wristband(['admin', 'reset-passkeys', '--email', OWNER], cliEnv(p)))
    assert.equal((await passkeySignIn(t, intruder)).statusCode, 401)
    await until('the intruder token is refused', async () => !(await verifyToken(t, intruderToken)).valid)
    assert.match((await waitMail(/A passkey was removed/)).text ?? '', /Every passkey \(1\)/)
    // The owner signs in with the new password and may register a passkey of their own, with it.
    const own = (await login(t, OWNER, 'admin', 'owner-new-pass')).access_token
    const mine = await registerPasskey(t, own, softAuthenticator(), {}, 'Mine', 'owner-new-pass')
    assert.equal(mine.statusCode, 201, mine.body)
  })

  test("the dashboard's first passkey needs the password too", async () => {
    const session = await dashboardSession(t, 'partner1')
    const page = await t.request({
      method: 'GET',
      url: '/dashboard/passkeys',
      cookies: { wb_session: session },
    })
    assert.match(page.body, /name="password"/)
    const csrf = formToken(page.body)
    const options = await t.request({
      method: 'POST',
      url: '/dashboard/passkeys/options',
      headers: { 'x-csrf-token': csrf },
      cookies: { wb_session: session },
    })
    assert.equal(options.statusCode, 200, options.body)
    const flow = cookieOf(options, 'wb_passkey_flow')!.value
    const added = await t.request({
      method: 'POST',
      url: '/dashboard/passkeys',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      cookies: { wb_session: session, wb_passkey_flow: flow },
      payload: new URLSearchParams({
        csrf_token: csrf,
        name: 'No password',
        response: JSON.stringify(softAuthenticator().register(options.json().options)),
      }).toString(),
    })
    assert.equal(added.statusCode, 400, added.body)
    assert.match(added.body, /password/)
    const stored = await t.db.db
      .selectFrom('passkeys')
      .select('id')
      .where('subject_kind', '=', 'dashboard_user')
      .execute()
    assert.deepEqual(stored, [])
  })
})
