import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { ParsedMail } from 'mailparser'
import { eventAdmin, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { assertPerMinuteLimit } from '../../test/helpers/rate-limit.js'
import { type SmtpSink, startAppWithMail } from '../../test/helpers/smtp-sink.js'
import { until } from '../../test/helpers/until.js'
import { sha256Hex } from '../platform/digest.js'

const SEED = withStandardSeed({
  administrators: [
    eventAdmin('quota@example.com'),
    eventAdmin('gone@example.com'),
    eventAdmin('off@example.com'),
    eventAdmin('outage@example.com'),
  ],
})

const HOUR_MS = 3_600_000

function tokenOf(mail: ParsedMail): string {
  const m = /\/admin\/password-reset\/([A-Za-z0-9_-]+)/.exec(mail.text ?? '')
  assert.ok(m, `no reset link in: ${mail.text}`)
  return m[1]!
}

eachBackend(httpBackends, 'admin password reset', (backend) => {
  let t: TestApp
  let sink: SmtpSink
  let close = async () => {}
  before(async () => {
    ;({ t, sink, close } = await startAppWithMail(backend))
    await t.seed(SEED)
  })
  after(async () => close())

  const send = (email: string) =>
    t.request({ method: 'POST', url: '/admin/password-reset/email-send', payload: { email } })
  const confirm = (token: string, new_password: string) =>
    t.request({ method: 'POST', url: `/admin/password-reset/${token}`, payload: { new_password } })

  /** Requests a reset and returns the token from the e-mail that arrives. */
  async function requestToken(email: string): Promise<string> {
    const resets = () => sink.to(email).filter((m) => /Reset your wristband password/.test(m.subject ?? ''))
    const already = resets().length
    const res = await send(email)
    assert.equal(res.statusCode, 200, res.body)
    await until(`reset mail to ${email}`, async () => resets().length > already)
    return tokenOf(resets()[already]!)
  }

  let known = ''
  test('a known address gets an e-mail with a link holding 32 random bytes; only its hash is stored', async () => {
    const res = await send('EV1@example.com')
    assert.equal(res.statusCode, 200)
    known = res.body
    const mail = await sink.waitFor('ev1@example.com', /Reset your wristband password/)
    const token = tokenOf(mail)
    assert.match(token, /^[A-Za-z0-9_-]{43}$/)
    assert.equal(Buffer.from(token, 'base64url').length, 32)
    assert.ok(mail.text?.includes(`http://127.0.0.1:8000/admin/password-reset/${token}`))
    assert.ok(typeof mail.html === 'string' && mail.html.includes(token))
    const rows = await t.db.db.selectFrom('password_reset_tokens').selectAll().execute()
    assert.ok(!JSON.stringify(rows).includes(token), 'token stored in plain text')
    assert.ok(rows.some((r) => r.token_hash === sha256Hex(token)))
  })

  test('an unknown address gets the identical 200 and no e-mail is sent', async () => {
    const res = await send('nobody@example.com')
    assert.equal(res.statusCode, 200)
    assert.equal(res.body, known)
    assert.deepEqual(res.json(), JSON.parse(known))
    // The request queues its job as a known address does; the job finds no administrator.
    await until('the job of the unknown address has run', async () => {
      const jobs = await t.db.db
        .selectFrom('jobs')
        .select(['payload', 'done_at'])
        .where('payload', 'like', '%nobody@example.com%')
        .execute()
      return jobs.length === 1 && jobs[0]!.done_at !== null
    })
    assert.equal(sink.to('nobody@example.com').length, 0)
  })

  test('the e-mail must match the pattern as a whole', async () => {
    for (const email of ['a@b@example.com', 'see a@b.co', 'ab.co', 'a@b', 'a@b.c d']) {
      const res = await send(email)
      assert.equal(res.statusCode, 422, email)
      assert.equal(res.json().detail[0].type, 'string_pattern_mismatch', email)
    }
    const tooLong = await send(`${'a'.repeat(250)}@b.co`)
    assert.equal(tooLong.statusCode, 422)
    const extra = await t.request({
      method: 'POST',
      url: '/admin/password-reset/email-send',
      payload: { email: 'ev1@example.com', role: 'admin' },
    })
    assert.equal(extra.statusCode, 422)
  })

  test('the new password sets, signs the administrator out everywhere and sends a notice', async () => {
    const session = await login(t, 'ev1@example.com')
    const token = await requestToken('ev1@example.com')
    const res = await confirm(token, 'brand-new-pass')
    assert.equal(res.statusCode, 200, res.body)
    assert.equal(typeof res.json().message, 'string')
    await login(t, 'ev1@example.com', 'admin', 'brand-new-pass')
    await assert.rejects(login(t, 'ev1@example.com'), /401/)
    const refreshed = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: session.refresh_token },
    })
    assert.equal(refreshed.statusCode, 401, 'refresh token survived the reset')
    const notice = await sink.waitFor('ev1@example.com', /password was changed/)
    assert.ok(!notice.text?.includes('brand-new-pass'))
  })

  test('every invalid link gets the identical 410: unknown, used, expired, other link after a reset, disabled, deleted', async () => {
    const bodies: string[] = []
    const expect410 = async (token: string, what: string) => {
      const res = await confirm(token, 'another-pass-1')
      assert.equal(res.statusCode, 410, `${what}: ${res.body}`)
      bodies.push(res.body)
    }
    await expect410('x'.repeat(43), 'unknown')
    t.clock.advance(HOUR_MS) // a fresh hourly quota for the three links below

    const first = await requestToken('ev1@example.com')
    const second = await requestToken('ev1@example.com')
    assert.equal((await confirm(first, 'another-pass-0')).statusCode, 200)
    await expect410(first, 'used')
    await expect410(second, 'older link after a reset')

    const expiring = await requestToken('ev1@example.com')
    t.clock.advance(30 * 60_000 + 1000)
    await expect410(expiring, 'expired')

    const disabled = await requestToken('off@example.com')
    await t.db.db
      .updateTable('administrators')
      .set({ disabled: 1 })
      .where('email', '=', 'off@example.com')
      .execute()
    await expect410(disabled, 'disabled administrator')

    const deleted = await requestToken('gone@example.com')
    await t.db.db.deleteFrom('administrators').where('email', '=', 'gone@example.com').execute()
    await expect410(deleted, 'deleted administrator')

    assert.equal(new Set(bodies).size, 1, `410 bodies differ: ${[...new Set(bodies)].join(' | ')}`)
    assert.ok(JSON.parse(bodies[0]!).detail)
  })

  test('a new password of 8 to 128 characters; others are 422 and leave the link usable', async () => {
    t.clock.advance(HOUR_MS)
    const token = await requestToken('ev1@example.com')
    for (const pw of ['short-7', 'x'.repeat(129)]) {
      const res = await confirm(token, pw)
      assert.equal(res.statusCode, 422)
      assert.equal(res.json().detail[0].loc.join('.'), 'body.new_password')
    }
    assert.equal((await confirm(token, 'x'.repeat(128))).statusCode, 200)
  })

  test('one link used twice at once sets the password once', async () => {
    t.clock.advance(HOUR_MS)
    const token = await requestToken('ev1@example.com')
    const answers = await Promise.all([confirm(token, 'race-pass-one'), confirm(token, 'race-pass-two')])
    assert.deepEqual(answers.map((r) => r.statusCode).sort(), [200, 410])
    const winner = answers[0]!.statusCode === 200 ? 'race-pass-one' : 'race-pass-two'
    await login(t, 'ev1@example.com', 'admin', winner)
  })

  test('a known administrator over the hourly quota gets 429 until the hour has passed', async () => {
    for (let i = 0; i < 3; i++) assert.equal((await send('quota@example.com')).statusCode, 200)
    const res = await send('quota@example.com')
    assert.equal(res.statusCode, 429)
    const body = res.json()
    assert.equal(body.error, 'rate_limit_exceeded')
    assert.equal(body.limit, 3)
    const retryAfter = Number(res.headers['retry-after'])
    assert.ok(retryAfter > 0 && retryAfter <= 3600)
    assert.equal(body.retry_after, retryAfter)
    const unknown = await send('stranger@example.com')
    assert.equal(unknown.statusCode, 200, 'the quota counts per address')
    t.clock.advance(HOUR_MS)
    assert.equal((await send('quota@example.com')).statusCode, 200)
  })

  test('while the mail server is down the request still answers 200; the e-mail arrives once it is back', async () => {
    await sink.stop()
    const res = await send('outage@example.com')
    assert.equal(res.statusCode, 200)
    assert.equal(res.body, known)
    const job = () =>
      t.db.db
        .selectFrom('jobs')
        .selectAll()
        .where('payload', 'like', '%outage@example.com%')
        .executeTakeFirstOrThrow()
    await until('a failed delivery attempt', async () => (await job()).last_error !== null)
    const failed = await job()
    assert.equal(failed.done_at, null)
    assert.ok(failed.run_at > t.clock.now(), 'retry scheduled for later')

    await sink.start()
    assert.equal(sink.to('outage@example.com').length, 0)
    t.clock.advance(failed.run_at - t.clock.now() + 1)
    const mail = await sink.waitFor('outage@example.com', /Reset your wristband password/)
    const token = tokenOf(mail)
    assert.equal((await confirm(token, 'after-the-outage')).statusCode, 200)
    await login(t, 'outage@example.com', 'admin', 'after-the-outage')
  })

  test('rate limits: e-mail-send 5 and confirm 30 per minute per address', async () => {
    let n = 0
    // A new e-mail address per request, so the hourly quota per address stays out of the way.
    await assertPerMinuteLimit(t, 5, () => ({
      method: 'POST',
      url: '/admin/password-reset/email-send',
      payload: { email: `nobody${++n}@example.com` },
    }))
    await assertPerMinuteLimit(t, 30, () => ({
      method: 'POST',
      url: `/admin/password-reset/${'y'.repeat(43)}`,
      payload: { new_password: 'whatever-pass' },
    }))
  })
})
