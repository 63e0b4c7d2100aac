import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { generateSync } from 'otplib'
import { eventAdmin, forEachBackend, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

/**
 * Audit of 2026-11-23, item 1: an administrator whose MFA was enabled could be signed in with the
 * password alone, call POST /admin/mfa/setup, verify a code of the new secret and so obtain a fresh
 * `mfa_verified_at` (passing every fresh-MFA guard) while the real authenticator stopped working.
 * Now: with MFA enabled, setup needs a token with fresh MFA (403 `mfa_required`); only the enabled
 * secret turns a password-only session into a fresh one; a pending secret replaces the enabled one
 * only when verified from a fresh session.
 */
const STEP_MS = 30_000
const EMAIL = 'reenrol@example.com'

forEachBackend(httpBackends, 'MFA re-enrolment needs the enrolled factor (audit item 1)', (ctx) => {
  let t: TestApp
  /** The administrator's real authenticator. */
  let enrolled = ''
  /** An access token whose mfa_verified_at is fresh, with its refresh token. */
  let fresh = { access_token: '', refresh_token: '' }

  /** The next time step, so a code of it was never used before (codes are single-use). */
  const nextStep = () => t.clock.advance(STEP_MS - (t.clock.now() % STEP_MS) + 100)
  const code = (secret: string) => generateSync({ secret, epoch: Math.floor(t.clock.now() / 1000) })
  const setup = (token: string) => t.request({ method: 'POST', url: '/admin/mfa/setup', token })
  const verify = (token: string, c: string) =>
    t.request({ method: 'POST', url: '/admin/mfa/verify', token, payload: { code: c } })
  const sensitive = (token: string) => t.request({ method: 'GET', url: '/admin/sensitive/ping', token })
  const passwordOnly = async () => (await login(t, EMAIL)).access_token
  const stored = () =>
    t.db.db
      .selectFrom('administrators')
      .select(['mfa_secret', 'mfa_pending_secret'])
      .where('email', '=', EMAIL)
      .executeTakeFirstOrThrow()

  before(async () => {
    t = ctx()
    await t.seed(
      withStandardSeed({
        administrators: [eventAdmin(EMAIL)],
      }),
    )
    // First enrolment: a password-only session may enrol while MFA is off.
    const token = await passwordOnly()
    const res = await setup(token)
    assert.equal(res.statusCode, 200, res.body)
    enrolled = (res.json() as { secret: string }).secret
    nextStep()
    const ok = await verify(token, code(enrolled))
    assert.equal(ok.statusCode, 200, ok.body)
    fresh = ok.json()
  })

  test('a password-only session cannot start a re-enrolment: 403 mfa_required, nothing stored', async () => {
    const before = await stored()
    const res = await setup(await passwordOnly())
    assert.equal(res.statusCode, 403, res.body)
    assert.equal(res.json().error, 'mfa_required')
    assert.equal(typeof res.json().detail, 'string')
    assert.deepEqual(await stored(), before)
    // The real authenticator still works and is what makes the session fresh.
    nextStep()
    const ok = await verify(await passwordOnly(), code(enrolled))
    assert.equal(ok.statusCode, 200, ok.body)
    assert.equal((await sensitive(ok.json().access_token)).statusCode, 200)
  })

  test('a pending secret does not count from a password-only session; the enabled one stays', async () => {
    // The real owner starts a re-enrolment from a fresh session.
    const started = await setup(fresh.access_token)
    assert.equal(started.statusCode, 200, started.body)
    const pending = (started.json() as { secret: string }).secret
    const token = await passwordOnly()
    nextStep()
    const refused = await verify(token, code(pending))
    assert.equal(refused.statusCode, 400, 'a code of the pending secret from a password-only session')
    assert.equal((await sensitive(token)).statusCode, 403)
    assert.notEqual((await stored()).mfa_pending_secret, null, 'the pending secret is still pending')
    // The enabled secret still signs in, then the fresh session completes the replacement.
    const ok = await verify(token, code(enrolled))
    assert.equal(ok.statusCode, 200, ok.body)
    nextStep()
    const replaced = await verify(ok.json().access_token, code(pending))
    assert.equal(replaced.statusCode, 200, replaced.body)
    nextStep()
    assert.equal((await verify(await passwordOnly(), code(enrolled))).statusCode, 400, 'the old secret')
    const again = await verify(await passwordOnly(), code(pending))
    assert.equal(again.statusCode, 200, again.body)
    enrolled = pending
    fresh = again.json()
  })

  test('a stale MFA verification is not enough to start a re-enrolment', async () => {
    t.clock.advance((t.config.MFA_FRESHNESS_WINDOW_HOURS * 3600 + 60) * 1000)
    // A refresh keeps the time of the verification, which is now outside the window.
    const refreshed = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: fresh.refresh_token },
    })
    assert.equal(refreshed.statusCode, 200, refreshed.body)
    const stale = refreshed.json().access_token
    const res = await setup(stale)
    assert.equal(res.statusCode, 403, res.body)
    assert.equal(res.json().error, 'mfa_required')
    nextStep()
    const ok = await verify(stale, code(enrolled))
    assert.equal(ok.statusCode, 200, ok.body)
    assert.equal((await setup(ok.json().access_token)).statusCode, 200, 'fresh again: setup works')
  })
})
