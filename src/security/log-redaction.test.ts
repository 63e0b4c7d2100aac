import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, test } from 'node:test'
import { STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { type SmtpSink, startAppWithMail } from '../../test/helpers/smtp-sink.js'

/**
 * Secrets in URLs (reset tokens, holder-link tokens) reach no log line, however the URL spells the
 * route: the router decodes `%2D` and friends, so redaction works on the matched route's parameters,
 * and on the decoded path when no route matched. Every line of the log stream is searched.
 */
const fakeToken = () => randomBytes(32).toString('base64url')

eachBackend(httpBackends, 'log redaction of secrets in URLs', (backend) => {
  let t: TestApp
  let sink: SmtpSink
  let close = async () => {}
  before(async () => {
    ;({ t, sink, close } = await startAppWithMail(backend))
    await t.seed(STANDARD_SEED)
  })
  after(async () => close())

  /** Lines of the log that hold `secret` (as is or percent-encoded). */
  const leaks = (secret: string) =>
    t.logs.filter((line) => line.includes(secret) || line.includes(encodeURIComponent(secret)))

  test('POST /admin/password%2Dreset/<token> uses the link and logs no part of its token', async () => {
    const sent = await t.request({
      method: 'POST',
      url: '/admin/password-reset/email-send',
      payload: { email: 'ev1@example.com' },
    })
    assert.equal(sent.statusCode, 200)
    const mail = await sink.waitFor('ev1@example.com', /Reset your wristband password/)
    const token = /\/admin\/password-reset\/([A-Za-z0-9_-]{43})/.exec(mail.text ?? '')![1]!
    const res = await t.request({
      method: 'POST',
      url: `/admin/password%2Dreset/${token}`,
      payload: { new_password: 'logged-nowhere-1' },
    })
    assert.equal(res.statusCode, 200, `the encoded spelling reached the route: ${res.body}`)
    assert.deepEqual(leaks(token), [])
    assert.ok(
      t.logs.some((l) => l.includes('/admin/password-reset/[redacted]')),
      'the request was logged',
    )
  })

  test('no spelling of a reset or holder-link URL, matched or not, logs its token', async () => {
    const cases: [string, (tok: string) => string][] = [
      ['GET', (x) => `/admin/password-reset/${x}`],
      ['GET', (x) => `/admin/password%2dreset/${x}`],
      ['GET', (x) => `/admin/%70assword-reset/${x}`],
      ['POST', (x) => `/%61dmin/password-reset/${x}`],
      ['GET', (x) => `/admin/password-reset/${x}/`],
      ['GET', (x) => `/ADMIN/PASSWORD-RESET/${x}`],
      ['GET', (x) => `//admin/password-reset/${x}`],
      ['GET', (x) => `/admin/password-reset/${x}?next=1`],
      ['GET', (x) => `/holder/links/${x}`],
      ['GET', (x) => `/holder/%6Cinks/${x}`],
      ['POST', (x) => `/holder/links/${x}/claim`],
      ['POST', (x) => `/holder/link%73/${x}/claim`],
      ['GET', (x) => `/holder/links/${x}%2Fclaim`],
    ]
    for (const [method, url] of cases) {
      const token = fakeToken()
      const linesBefore = t.logs.length
      await t.request({
        method: method as 'GET',
        url: url(token),
        ...(method === 'POST' ? { payload: { new_password: 'whatever-pass-1' } } : {}),
      })
      assert.ok(t.logs.length > linesBefore, `${method} ${url('<token>')} was not logged`)
      assert.deepEqual(leaks(token), [], `${method} ${url('<token>')}`)
    }
  })
})
