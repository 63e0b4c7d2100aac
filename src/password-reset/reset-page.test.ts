import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { type Browser, chromium } from 'playwright-core'
import { login, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { CHROMIUM, CHROMIUM_ARGS } from '../../test/helpers/browser.js'
import { type SmtpSink, startAppWithMail } from '../../test/helpers/smtp-sink.js'
import { until } from '../../test/helpers/until.js'

eachBackend(httpBackends, 'the page a reset link opens', (backend) => {
  let t: TestApp
  let sink: SmtpSink
  let close = async () => {}
  let browser: Browser | undefined
  let origin: string
  before(async () => {
    ;({ t, sink, close } = await startAppWithMail(backend))
    await t.seed(STANDARD_SEED)
    await t.app.listen({ port: 0, host: '127.0.0.1' })
    origin = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
  })
  after(async () => {
    await browser?.close()
    await close()
  })

  /** The reset link of a fresh e-mail, pointed at this instance. */
  async function resetLink(email: string): Promise<string> {
    const resets = () => sink.to(email).filter((m) => /Reset your wristband password/.test(m.subject ?? ''))
    const already = resets().length
    await t.request({ method: 'POST', url: '/admin/password-reset/email-send', payload: { email } })
    await until('the reset mail', async () => resets().length > already)
    const path = /\/admin\/password-reset\/[A-Za-z0-9_-]+/.exec(resets()[already]!.text ?? '')![0]
    return `${origin}${path}`
  }

  test('the page is static, holds no token and allows only its own script', async () => {
    const link = await resetLink('ev1@example.com')
    const res = await t.request({ method: 'GET', url: new URL(link).pathname })
    assert.equal(res.statusCode, 200)
    assert.match(String(res.headers['content-type']), /^text\/html/)
    assert.equal(res.headers['cache-control'], 'no-store')
    assert.ok(!res.body.includes(link.split('/').pop()!), 'token written into the page')
    const csp = String(res.headers['content-security-policy'])
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/)
    assert.match(csp, /default-src 'none'/)
    assert.match(csp, /frame-ancestors 'none'/)
    const script = /<script>([\s\S]*)<\/script>/.exec(res.body)![1]!
    const hash = createHash('sha256').update(script).digest('base64')
    assert.ok(csp.includes(`'sha256-${hash}'`), 'the inline script is not the one the CSP allows')
  })

  test('in a browser: the link sets the new password; used again it says the link is invalid', async () => {
    const link = await resetLink('ev1@example.com')
    const page = await browser!.newPage()
    const violations: string[] = []
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) violations.push(m.text())
    })
    await page.goto(link)
    await page.fill('input[name=password]', 'typed-in-browser')
    await page.fill('input[name=again]', 'typed-in-browser-2')
    await page.click('button[type=submit]')
    await page.locator('#out', { hasText: 'differ' }).waitFor()

    await page.fill('input[name=again]', 'typed-in-browser')
    await page.click('button[type=submit]')
    await page.locator('#out', { hasText: 'changed' }).waitFor()
    await login(t, 'ev1@example.com', 'admin', 'typed-in-browser')

    await page.goto(link)
    await page.fill('input[name=password]', 'another-password')
    await page.fill('input[name=again]', 'another-password')
    await page.click('button[type=submit]')
    await page.locator('#out', { hasText: 'invalid' }).waitFor()
    assert.deepEqual(violations, [])
    await page.close()
  })
})
