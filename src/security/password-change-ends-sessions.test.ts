import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { eventAdmin, login, startApp, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { cliEnv, wristband } from '../../test/helpers/cli.js'
import { dashboardSession } from '../../test/helpers/dashboard.js'
import { SmtpSink } from '../../test/helpers/smtp-sink.js'

/**
 * Audit of 2026-11-23, item 8: dashboard sessions survived a password reset (by link or by the
 * CLI), so whoever held a session kept it after the owner changed the password. Now any password
 * change ends the account's dashboard sessions and its refresh tokens.
 */
const BY_LINK = 'reset-by-link@example.com'
const BY_CLI = 'reset-by-cli@example.com'

eachBackend(
  httpBackends,
  'a password change ends dashboard sessions and refresh tokens (audit item 8)',
  (backend) => {
    let p: ProvisionedBackend
    let t: TestApp
    const sink = new SmtpSink()

    before(async () => {
      await sink.start()
      p = await backend.provision()
      t = await startApp(backend, { SMTP_URL: sink.url, JOBS_POLL_MS: '50' }, p)
      await t.seed(
        withStandardSeed({
          administrators: [eventAdmin(BY_LINK), eventAdmin(BY_CLI)],
        }),
      )
    })
    after(async () => {
      await t?.close()
      await p?.dispose()
      await sink.stop()
    })

    const dashboard = (session: string) =>
      t.request({ method: 'GET', url: '/dashboard', cookies: { wb_session: session } })
    const refresh = (refresh_token: string) =>
      t.request({ method: 'POST', url: '/auth/refresh', payload: { refresh_token } })
    /** Both kinds of session an administrator can hold, checked to be live. */
    async function openSessions(email: string) {
      const session = await dashboardSession(t, email)
      assert.equal((await dashboard(session)).statusCode, 200)
      const pair = await login(t, email)
      return { session, refreshToken: pair.refresh_token }
    }
    async function assertEnded(email: string, open: { session: string; refreshToken: string }) {
      assert.equal((await dashboard(open.session)).statusCode, 303, 'the dashboard session survived')
      assert.equal((await refresh(open.refreshToken)).statusCode, 401, 'the refresh token survived')
      const { id } = await t.db.db
        .selectFrom('administrators')
        .select('id')
        .where('email', '=', email)
        .executeTakeFirstOrThrow()
      const rows = await t.db.db
        .selectFrom('dashboard_sessions')
        .select('token_hash')
        .where('subject_kind', '=', 'admin')
        .where('subject_id', '=', id)
        .execute()
      assert.deepEqual(rows, [])
    }

    test('a reset by e-mail link ends them', async () => {
      const open = await openSessions(BY_LINK)
      const sent = await t.request({
        method: 'POST',
        url: '/admin/password-reset/email-send',
        payload: { email: BY_LINK },
      })
      assert.equal(sent.statusCode, 200)
      const mail = await sink.waitFor(BY_LINK, /Reset your wristband password/)
      const token = /\/admin\/password-reset\/([A-Za-z0-9_-]+)/.exec(mail.text ?? '')?.[1]
      assert.ok(token, 'no link in the mail')
      const done = await t.request({
        method: 'POST',
        url: `/admin/password-reset/${token}`,
        payload: { new_password: 'brand-new-pass-1' },
      })
      assert.equal(done.statusCode, 200, done.body)
      await assertEnded(BY_LINK, open)
      await dashboardSession(t, BY_LINK, 'brand-new-pass-1')
    })

    test('a reset by `wristband admin reset-password` ends them', async () => {
      const open = await openSessions(BY_CLI)
      const env = cliEnv(p)
      const run = await wristband(
        ['admin', 'reset-password', '--email', BY_CLI, '--password-stdin'],
        env,
        'brand-new-pass-2\n',
      )
      assert.equal(run.code, 0, run.stderr)
      await assertEnded(BY_CLI, open)
      await dashboardSession(t, BY_CLI, 'brand-new-pass-2')
    })
  },
)
