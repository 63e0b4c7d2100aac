// The dashboard's TOTP step in Debian's Chromium (playwright-core), against the service on a real port.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { BrowserContext, Page } from 'playwright-core'
import { eventAdmin, startApp, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { artifact, type ChromiumPage, openChromium } from '../../test/helpers/browser.js'
import { enrolMfa, nextCode } from '../../test/helpers/mfa.js'

const ADMIN = 'browser-mfa@example.com'

if (process.env.SKIP_BROWSER_TESTS === '1') {
  describe('dashboard TOTP step in Chromium', {
    skip: 'SKIP_BROWSER_TESTS=1: browser tests SKIPPED',
  }, () => {})
} else {
  eachBackend(httpBackends, 'dashboard TOTP step in Chromium', (backend) => {
    let t: TestApp
    let base: string
    let secret = ''
    let browser: ChromiumPage | undefined
    let context: BrowserContext
    let page: Page
    let problems: string[] = []

    before(async () => {
      t = await startApp(backend)
      await t.seed(withStandardSeed({ administrators: [eventAdmin(ADMIN)] }))
      secret = await enrolMfa(t, ADMIN)
      base = await t.app.listen({ host: '127.0.0.1', port: 0 })
      browser = await openChromium({ width: 1280, height: 800 })
      ;({ context, page, problems } = browser)
    })

    // The browser first: a connection it opened ahead of a request would hold the server's close.
    after(async () => {
      await browser?.close()
      await t?.close()
    })

    const sessionCookie = async () => (await context.cookies()).find((c) => c.name === 'wb_session')

    async function submitCode(code: string) {
      await page.getByLabel('Code').fill(code)
      await page.getByRole('button', { name: 'Verify' }).click()
      await page.waitForLoadState('domcontentloaded')
    }

    test('the password leads to the code step, not into the dashboard', async () => {
      await page.goto(`${base}/dashboard/login`)
      await page.getByLabel('Username or e-mail').fill(ADMIN)
      await page.getByLabel('Password').fill('s3cret-pass')
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.waitForLoadState('domcontentloaded')
      assert.equal(new URL(page.url()).pathname, '/dashboard/login/code')
      assert.equal(await page.locator('h1').textContent(), 'Authentication code')
      assert.equal(await page.getByLabel('Code').getAttribute('autocomplete'), 'one-time-code')
      assert.equal(await sessionCookie(), undefined)
      await page.screenshot({ path: artifact('dashboard-code-step.png') })
      // The dashboard itself still sends the browser to sign in.
      await page.goto(`${base}/dashboard`)
      assert.equal(new URL(page.url()).pathname, '/dashboard/login')
    })

    test('a wrong code keeps the administrator on the code step with a message', async () => {
      await page.goto(`${base}/dashboard/login/code`)
      await submitCode('000000')
      assert.equal(new URL(page.url()).pathname, '/dashboard/login/code')
      assert.match(String(await page.getByRole('alert').textContent()), /^Invalid code/)
      assert.equal(await sessionCookie(), undefined)
    })

    test('the right code opens the dashboard', async () => {
      await submitCode(nextCode(t, secret))
      assert.equal(new URL(page.url()).pathname, '/dashboard')
      assert.equal(await page.locator('header .who').textContent(), ADMIN)
      const session = await sessionCookie()
      assert.equal(session?.httpOnly, true)
      assert.equal(session?.sameSite, 'Strict')
      assert.equal(
        (await context.cookies()).some((c) => c.name === 'wb_login_pending'),
        false,
        'the pending sign-in outlived it',
      )
    })

    test('no console errors, script errors or CSP violations on any page', () => {
      // The wrong code's answer (401) logs its status; nothing else may.
      assert.deepEqual(
        problems.filter((p) => !/status of 401/.test(p)),
        [],
      )
    })
  })
}
