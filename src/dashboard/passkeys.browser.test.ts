// Passkeys in Debian's Chromium (playwright-core) with a virtual authenticator (the DevTools protocol's
// WebAuthn domain), against the service on a real port: register in the dashboard, sign out, sign in with
// it; sign in through the API from a page; remove it.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { BrowserContext, CDPSession, Page } from 'playwright-core'
import { eventAdmin, startApp, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { artifact, type ChromiumPage, openChromium } from '../../test/helpers/browser.js'
import { auditOf } from '../../test/helpers/passkeys.js'
import { freePort } from '../../test/helpers/processes.js'

const ADMIN = 'browser-passkey@example.com'

if (process.env.SKIP_BROWSER_TESTS === '1') {
  describe('dashboard passkeys in Chromium', {
    skip: 'SKIP_BROWSER_TESTS=1: browser tests SKIPPED',
  }, () => {})
} else {
  eachBackend(httpBackends, 'dashboard passkeys in Chromium with a virtual authenticator', (backend) => {
    let t: TestApp
    let base: string
    let browser: ChromiumPage | undefined
    let context: BrowserContext
    let page: Page
    let cdp: CDPSession
    let authenticatorId = ''
    let problems: string[] = []

    before(async () => {
      // WebAuthn needs a host name for its RP ID (never an IP address): the page is on localhost.
      const port = await freePort()
      base = `http://localhost:${port}`
      t = await startApp(backend, {
        WEBAUTHN_RP_ID: 'localhost',
        WEBAUTHN_ORIGINS: base,
        PASSKEYS_REQUIRED_FOR: 'admins',
      })
      await t.seed(withStandardSeed({ administrators: [eventAdmin(ADMIN)] }))
      await t.app.listen({ host: '127.0.0.1', port })
      browser = await openChromium({ width: 1280, height: 800 })
      ;({ context, page, problems } = browser)
      cdp = await context.newCDPSession(page)
      await cdp.send('WebAuthn.enable')
      ;({ authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
        options: {
          protocol: 'ctap2',
          transport: 'internal',
          hasResidentKey: true,
          hasUserVerification: true,
          isUserVerified: true,
          automaticPresenceSimulation: true,
        },
      }))
    })

    // The browser first: a connection it opened ahead of a request would hold the server's close.
    after(async () => {
      await browser?.close()
      await t?.close()
    })

    const sessionCookie = async () => (await context.cookies()).find((c) => c.name === 'wb_session')
    const storedPasskeys = () => t.db.db.selectFrom('passkeys').select(['id', 'name', 'counter']).execute()

    const presence = (enabled: boolean) =>
      cdp.send('WebAuthn.setAutomaticPresenceSimulation', { authenticatorId, enabled })

    async function signInWithPassword() {
      await page.goto(`${base}/dashboard/login`)
      await page.getByLabel('Username or e-mail').fill(ADMIN)
      await page.getByLabel('Password').fill('s3cret-pass')
      await page.getByRole('button', { name: 'Sign in', exact: true }).click()
    }

    async function signOut() {
      await page.getByRole('button', { name: 'Sign out' }).click()
      await page.waitForURL(`${base}/dashboard/login`)
      assert.equal(await sessionCookie(), undefined)
    }

    test('PASSKEYS_REQUIRED_FOR: the password leads to the passkeys page, where one is registered', async () => {
      await signInWithPassword()
      await page.waitForURL(`${base}/dashboard/passkeys?required=1`)
      assert.equal(await page.locator('h1').textContent(), 'Passkeys')
      assert.match(String(await page.getByRole('status').textContent()), /must sign in with a passkey/)
      await page.getByLabel('Name').fill('Virtual laptop')
      await page.getByLabel('Your password').fill('s3cret-pass')
      await page.getByRole('button', { name: 'Add a passkey' }).click()
      await page.waitForURL(`${base}/dashboard/passkeys?added=1`)
      assert.equal(await page.locator('table.passkeys tbody tr td').first().textContent(), 'Virtual laptop')
      await page.screenshot({ path: artifact('dashboard-passkeys.png') })
      const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId })
      assert.equal(credentials.length, 1)
      assert.equal(credentials[0]!.isResidentCredential, true, 'a discoverable credential (resident key)')
      assert.deepEqual(
        (await storedPasskeys()).map((p) => p.name),
        ['Virtual laptop'],
      )
    })

    test('signed out, the sign-in page offers the passkey (conditional UI) and it alone signs in', async () => {
      await signOut()
      // The virtual authenticator answers the page's conditional request at once (a person would pick
      // the passkey in the username field's suggestions).
      await page.waitForURL(`${base}/dashboard`)
      assert.equal(await page.locator('header .who').textContent(), ADMIN)
      assert.equal((await sessionCookie())?.httpOnly, true)
      const rows = await t.db.db.selectFrom('dashboard_sessions').select('mfa_verified_at').execute()
      assert.equal(rows.length, 1)
      assert.equal(typeof rows[0]!.mfa_verified_at, 'number', 'a passkey is two factors')
      const signIns = await auditOf(t, 'passkey_sign_in')
      assert.equal(signIns.at(-1)?.outcome, 'success')
      assert.ok(Number((await storedPasskeys())[0]!.counter) >= 1, 'the counter the authenticator sent')
    })

    test('after the password, an account in scope with a passkey is asked for it (the button), not a code', async () => {
      // Without presence the authenticator leaves the sign-in page's conditional request unanswered.
      await presence(false)
      await signOut()
      await signInWithPassword()
      await page.waitForURL(`${base}/dashboard/login/passkey`)
      assert.equal(await page.locator('h1').textContent(), 'Passkey')
      assert.equal(await sessionCookie(), undefined)
      await presence(true)
      await page.getByRole('button', { name: 'Use my passkey' }).click()
      await page.waitForURL(`${base}/dashboard`)
      assert.equal(await page.locator('header .who').textContent(), ADMIN)
      assert.equal((await auditOf(t, 'passkey_sign_in')).at(-1)?.detail.second_factor, true)
    })

    test('sign in through the API from a page: a token pair with a fresh mfa_verified_at', async () => {
      await page.goto(`${base}/dashboard/passkeys`)
      // A string, so the test runner's transform adds nothing the page lacks.
      const answer = await page.evaluate(`(async () => {
        const post = (url, body, token) =>
          fetch(url, {
            method: 'POST',
            headers: Object.assign(body ? { 'content-type': 'application/json' } : {}, token ? { authorization: 'Bearer ' + token } : {}),
            body: body ? JSON.stringify(body) : undefined,
          }).then(async (r) => ({ status: r.status, body: await r.json() }))
        const started = await post('/auth/passkey/options')
        const response = await window.SimpleWebAuthnBrowser.startAuthentication({ optionsJSON: started.body.options })
        const signedIn = await post('/auth/passkey', { flow: started.body.flow, response })
        const ping = await fetch('/admin/sensitive/ping', { headers: { authorization: 'Bearer ' + signedIn.body.access_token } })
        return { signedIn: signedIn.status, ping: ping.status }
      })()`)
      assert.deepEqual(answer, { signedIn: 200, ping: 200 })
    })

    test('remove the passkey: it no longer signs in', async () => {
      await page.goto(`${base}/dashboard/passkeys`)
      await page.getByRole('button', { name: 'Remove Virtual laptop' }).click()
      await page.waitForURL(`${base}/dashboard/passkeys`)
      assert.equal(await page.locator('p.empty').textContent(), 'No passkeys yet.')
      assert.deepEqual(await storedPasskeys(), [])
      assert.equal((await auditOf(t, 'passkey_removed')).length, 1)
      await signOut()
      // The authenticator still holds the credential and answers the conditional request; the service
      // no longer knows it, and the page that says so does not try again by itself.
      await page.waitForURL(`${base}/dashboard/login/passkey`)
      assert.match(String(await page.getByRole('alert').first().textContent()), /not accepted/)
      assert.equal(await sessionCookie(), undefined)
      assert.equal((await auditOf(t, 'passkey_sign_in')).at(-1)?.detail.reason, 'unknown_credential')
    })

    test('no script errors or CSP violations on any page', () => {
      // The refused sign-in's answer (401) logs its status; nothing else may.
      assert.deepEqual(
        problems.filter((p) => !/status of 401/.test(p)),
        [],
      )
    })
  })
}
