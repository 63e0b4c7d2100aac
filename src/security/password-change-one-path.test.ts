import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { ParsedMail } from 'mailparser'
import { eventAdmin, login, startApp, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { cliEnv, ok, wristband } from '../../test/helpers/cli.js'
import { dashboardSession } from '../../test/helpers/dashboard.js'
import { SmtpSink } from '../../test/helpers/smtp-sink.js'
import { until } from '../../test/helpers/until.js'

/**
 * Third audit (docs/security.md, "Third audit"): a password changed on the command line left the old
 * reset links alive and told the owner nothing; the reset link retired them and sent a notice. The
 * three ways a password changes (a reset link, the dashboard, `wristband admin reset-password`) now
 * take one path, `changePassword`: open reset links retired, every session and token ended, a notice.
 */
const BY_CLI = 'cli-change@example.com'
const BY_LINK = 'link-change@example.com'
const NOTICE = /Your wristband password was changed/
const LINK = /\/admin\/password-reset\/([A-Za-z0-9_-]+)/

eachBackend(
  httpBackends,
  'a password changed on the command line leaves the old reset links alive',
  (backend) => {
    let p: ProvisionedBackend
    let t: TestApp
    const sink = new SmtpSink()
    before(async () => {
      await sink.start()
      p = await backend.provision()
      t = await startApp(backend, { SMTP_URL: sink.url, JOBS_POLL_MS: '50' }, p)
      await t.seed(withStandardSeed({ administrators: [eventAdmin(BY_CLI), eventAdmin(BY_LINK)] }))
    })
    after(async () => {
      await t?.close()
      await p?.dispose()
      await sink.stop()
    })

    const mails = (to: string, subject: RegExp) => sink.to(to).filter((m) => subject.test(m.subject ?? ''))
    async function resetLink(email: string): Promise<string> {
      const already = mails(email, /Reset your wristband password/).length
      const sent = await t.request({
        method: 'POST',
        url: '/admin/password-reset/email-send',
        payload: { email },
      })
      assert.equal(sent.statusCode, 200, sent.body)
      await until(
        `reset mail to ${email}`,
        async () => mails(email, /Reset your wristband password/).length > already,
      )
      return LINK.exec(mails(email, /Reset your wristband password/)[already]!.text ?? '')![1]!
    }
    const confirm = (link: string, new_password: string) =>
      t.request({ method: 'POST', url: `/admin/password-reset/${link}`, payload: { new_password } })
    async function notice(email: string): Promise<ParsedMail> {
      await until(`the notice to ${email}`, async () => mails(email, NOTICE).length > 0)
      return mails(email, NOTICE).at(-1)!
    }

    test('wristband admin reset-password: the old reset link no longer works and the owner gets a notice', async () => {
      const link = await resetLink(BY_CLI)
      const pair = await login(t, BY_CLI)
      ok(
        await wristband(
          ['admin', 'reset-password', '--email', BY_CLI, '--password-stdin'],
          cliEnv(p),
          'set-by-cli-1',
        ),
      )
      const mail = await notice(BY_CLI)
      assert.match(mail.text ?? '', /command line/)
      // The unused link of before would set the password again: refused like any dead link.
      assert.equal((await confirm(link, 'set-by-the-link')).statusCode, 410)
      assert.equal((await login(t, BY_CLI, 'admin', 'set-by-cli-1')).access_token.length > 0, true)
      const refreshed = await t.request({
        method: 'POST',
        url: '/auth/refresh',
        payload: { refresh_token: pair.refresh_token },
      })
      assert.equal(refreshed.statusCode, 401)
    })

    test('a reset link: every other open link is retired, the owner gets a notice', async () => {
      const first = await resetLink(BY_LINK)
      const second = await resetLink(BY_LINK)
      assert.equal((await confirm(second, 'set-by-link-2')).statusCode, 200)
      assert.match((await notice(BY_LINK)).text ?? '', /reset link/)
      assert.equal((await confirm(first, 'set-by-link-1')).statusCode, 410)
      assert.equal((await login(t, BY_LINK, 'admin', 'set-by-link-2')).access_token.length > 0, true)
    })

    test("the dashboard: a dashboard user's new password ends the user's sessions", async () => {
      const root = (await login(t, 'root@example.com')).access_token
      const created = await t.request({
        method: 'POST',
        url: '/admin/dashboard-users',
        token: root,
        payload: { username: 'one-path', password: 'first-password', event_ids: [1] },
      })
      assert.equal(created.statusCode, 201, created.body)
      const session = await dashboardSession(t, 'one-path', 'first-password')
      const page = () => t.request({ method: 'GET', url: '/dashboard', cookies: { wb_session: session } })
      assert.equal((await page()).statusCode, 200)
      const changed = await t.request({
        method: 'PATCH',
        url: `/admin/dashboard-users/${created.json().id}`,
        token: root,
        payload: { password: 'second-password' },
      })
      assert.equal(changed.statusCode, 200, changed.body)
      assert.equal((await page()).statusCode, 303)
      const audit = await t.db.db
        .selectFrom('audit_log')
        .select('detail')
        .where('kind', '=', 'dashboard_user_updated')
        .executeTakeFirstOrThrow()
      assert.equal(JSON.parse(audit.detail!).password_changed, true)
    })
  },
)
