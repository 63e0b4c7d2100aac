// End-to-end: Debian's Chromium, driven by playwright-core, against the real service on a real port.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { BrowserContext, Page } from 'playwright-core'
import { ACTIVITY_ENV, type Activity, createActivity } from '../../test/helpers/activity.js'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { artifact, type ChromiumPage, openChromium } from '../../test/helpers/browser.js'

/** The cell texts of table rows (runs in the page). */
const rowsText = (rows: { querySelectorAll(s: string): ArrayLike<{ textContent: string | null }> }[]) =>
  rows.map((r) => Array.from(r.querySelectorAll('td'), (c) => c.textContent ?? ''))

const DESKTOP = { width: 1280, height: 800 }
const PHONE = { width: 390, height: 844 }

if (process.env.SKIP_BROWSER_TESTS === '1') {
  describe('dashboard in Chromium', { skip: 'SKIP_BROWSER_TESTS=1: browser tests SKIPPED' }, () => {})
} else {
  forEachBackend(
    httpBackends,
    'dashboard in Chromium',
    (ctx) => {
      let t: TestApp
      let activity: Activity
      let base: string
      let browser: ChromiumPage | undefined
      let context: BrowserContext
      let page: Page
      /** Console errors and page errors, CSP violations included: every test ends with none. */
      let problems: string[] = []

      before(async () => {
        t = ctx()
        activity = await createActivity(t)
        base = await t.app.listen({ host: '127.0.0.1', port: 0 })
        browser = await openChromium(DESKTOP)
        ;({ context, page, problems } = browser)
        // The page refreshes on a 15-second timer; a fake clock lets the test move it.
        await page.clock.install()
      })

      after(async () => {
        await browser?.close()
        await activity?.receiver.close()
      })

      async function figures(): Promise<Record<string, string>> {
        return page
          .locator('[data-figure]')
          .evaluateAll((els) =>
            Object.fromEntries(els.map((e) => [e.getAttribute('data-figure'), e.textContent])),
          )
      }

      async function signIn(username: string, password: string) {
        await page.goto(`${base}/dashboard/login`)
        await page.getByLabel('Username or e-mail').fill(username)
        await page.getByLabel('Password').fill(password)
        await page.getByRole('button', { name: 'Sign in' }).click()
        await page.waitForLoadState('domcontentloaded')
      }

      test('a wrong password keeps the user on the sign-in form with a message', async () => {
        await signIn('partner1', 'not-the-password')
        assert.equal(new URL(page.url()).pathname, '/dashboard/login')
        assert.equal(await page.getByRole('alert').textContent(), 'Incorrect username or password')
        await page.screenshot({ path: artifact('dashboard-sign-in-refused.png') })
        assert.deepEqual(
          (await context.cookies()).filter((c) => c.name === 'wb_session'),
          [],
        )
      })

      test('sign-in leads to the event list and the event page, whose figures come from the JSON', async () => {
        await signIn('partner1', 's3cret-pass')
        assert.equal(new URL(page.url()).pathname, '/dashboard')
        const session = (await context.cookies()).find((c) => c.name === 'wb_session')
        assert.ok(session)
        assert.equal(session.httpOnly, true)
        assert.equal(session.sameSite, 'Strict')
        assert.equal(await page.locator('ul.events li').count(), 1)
        await page.screenshot({ path: artifact('dashboard-events.png') })
        await page.getByRole('link', { name: /Summer Fest/ }).click()
        assert.equal(new URL(page.url()).pathname, '/dashboard/events/1')
        await page.locator('[data-status]').filter({ hasText: 'Updated' }).waitFor()
        assert.equal(await page.locator('h1').textContent(), 'Summer Fest')
        // The figures of the activity the test created through the partner, holder and ticket APIs.
        assert.deepEqual(await figures(), {
          issued: '5',
          claimed: '2',
          used: '4',
          revenue: '368.30',
          balance: '30.35',
          promo_balance: '5.70',
          webhook_delivered: '2',
          webhook_pending: '0',
          webhook_failing: '2',
          webhook_failed: '0',
        })
        assert.deepEqual(await page.locator('[data-ticket-types] tr').evaluateAll(rowsText), [
          ['Weekend pass', '2026-07-18 10:00', '89.50', '3', '1', '2', '268.50'],
          ['Day pass', '2026-07-18 10:00', '49.90', '2', '1', '2', '99.80'],
          ['VIP lounge', '2026-07-18 10:00', '199.00', '0', '0', '0', '0.00'],
        ])
        assert.match(String(await page.locator('[data-webhook-error]').textContent()), /HTTP 503/)
        assert.match(String(await page.locator('[data-webhook-url]').textContent()), /127\.0\.0\.1/)
        assert.match(String(await page.locator('[data-uses-total]').textContent()), /^4 uses in the range/)
        assert.equal(await page.locator('[data-chart="uses"] canvas').count(), 1)
        assert.equal(await page.locator('[data-chart="gates"] canvas').count(), 1)
        assert.equal(await page.locator('[data-gates-note]').textContent(), '3 gates, all uses of the event')
      })

      test('the range selector changes the uses-over-time chart', async () => {
        const total = page.locator('[data-uses-total]')
        await page.locator('[data-range]').selectOption('1h')
        await total.filter({ hasText: /^3 uses in the range · one bar per 5 minutes/ }).waitFor()
        await page.locator('[data-range]').selectOption('30d')
        await total.filter({ hasText: /^4 uses in the range · one bar per day/ }).waitFor()
        await page.locator('[data-range]').selectOption('24h')
        await total.filter({ hasText: /^4 uses in the range · one bar per hour/ }).waitFor()
      })

      test('the figures refresh without a page reload', async () => {
        const loadedBefore = await page.locator('main').getAttribute('data-loaded')
        let navigations = 0
        page.on('framenavigated', () => navigations++)
        const refreshed = page.waitForResponse((r) => r.url().includes('/dashboard/api/events/1/stats'))
        await page.clock.runFor(16_000)
        assert.equal((await refreshed).status(), 200)
        // A selector, not page.waitForFunction: its string predicate is evaluated in the page, which the
        // pages' CSP (no 'unsafe-eval') refuses whenever the first check does not already hold.
        const changed =
          loadedBefore === null
            ? 'main[data-loaded]'
            : `main:not([data-loaded=${JSON.stringify(loadedBefore)}])`
        await page.locator(changed).waitFor()
        assert.equal(navigations, 0)
      })

      test('screenshots of the event page at desktop and phone width', async () => {
        const laidOutAt = (width: number) =>
          page.waitForFunction(
            `window.innerWidth === ${width} && new Promise((r) => requestAnimationFrame(() => r(true)))`,
          )
        const name = `dashboard-event-${ctx().config.databaseUrl.startsWith('sqlite') ? 'sqlite' : 'postgres'}`
        await page.setViewportSize(DESKTOP)
        await laidOutAt(DESKTOP.width)
        const desktop = artifact(`${name}-desktop.png`)
        await page.screenshot({ path: desktop, fullPage: true })
        await page.setViewportSize(PHONE)
        // The overflow check below is only meaningful once the page has been laid out at phone width.
        await laidOutAt(PHONE.width)
        // At phone width nothing may stick out sideways, once the page has re-laid out (the chart
        // resizes on a later frame than the viewport change): wait for that state, then check it.
        const overflowNow = () =>
          page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth')
        await page
          .waitForFunction('document.documentElement.scrollWidth <= window.innerWidth', undefined, {
            timeout: 5000,
          })
          .catch(() => undefined)
        const overflow = await overflowNow()
        assert.ok(overflow <= 0, `the page is ${overflow}px wider than a phone screen`)
        await page.screenshot({ path: artifact(`${name}-phone.png`), fullPage: true })
        await page.setViewportSize(DESKTOP)
        if (process.env.UPDATE_DOCS_SCREENSHOT === '1' && name.endsWith('sqlite')) {
          fs.copyFileSync(desktop, path.resolve('docs', 'dashboard.png'))
        }
      })

      test("another event's figures are refused, as a page and as JSON", async () => {
        const res = await page.goto(`${base}/dashboard/events/2`)
        assert.equal(res?.status(), 403)
        assert.equal(await page.locator('h1').textContent(), 'Not allowed')
        const json = await page.evaluate(async () => {
          const r = await fetch('/dashboard/api/events/2/stats')
          return { status: r.status, body: await r.text() }
        })
        assert.equal(json.status, 403)
        assert.doesNotMatch(json.body, /winter/i)
      })

      test('sign-out ends the session', async () => {
        await page.goto(`${base}/dashboard`)
        await page.getByRole('button', { name: 'Sign out' }).click()
        await page.waitForLoadState('domcontentloaded')
        assert.equal(new URL(page.url()).pathname, '/dashboard/login')
        await page.goto(`${base}/dashboard/events/1`)
        assert.equal(new URL(page.url()).pathname, '/dashboard/login')
      })

      test('the list of events shows the figures of each event', async () => {
        await signIn('partner1', 's3cret-pass')
        assert.equal(new URL(page.url()).pathname, '/dashboard')
        assert.deepEqual(await page.locator('ul.events [data-event-figures]').allTextContents(), [
          '5 issued · 4 used · 368.30 revenue',
        ])
      })

      test('"Updated" gives the time in the event\'s time zone, as the charts do, not the browser\'s', async () => {
        // The browser runs in UTC; Summer Fest is in Europe/Berlin.
        // The figures the page itself loaded (its refresh timer is the test's fake clock: no other load).
        const loaded = page.waitForResponse((r) => r.url().includes('/dashboard/api/events/1/stats'))
        await page.goto(`${base}/dashboard/events/1`)
        const generatedAt = ((await (await loaded).json()) as { generated_at: string }).generated_at
        const status = page.locator('[data-status]').filter({ hasText: 'Updated' })
        await status.waitFor()
        const berlin = new Intl.DateTimeFormat('en-GB', {
          timeZone: 'Europe/Berlin',
          hour: '2-digit',
          minute: '2-digit',
          second: '2-digit',
          hourCycle: 'h23',
        }).format(new Date(generatedAt))
        assert.equal(await status.textContent(), `Updated ${berlin} (Europe/Berlin)`)
      })

      test('an event without uses shows a one-line note instead of an empty gates chart', async () => {
        await page.goto(`${base}/dashboard`)
        await page.getByRole('button', { name: 'Sign out' }).click()
        await page.waitForLoadState('domcontentloaded')
        await signIn('partner2', 's3cret-pass')
        assert.deepEqual(await page.locator('ul.events [data-event-figures]').allTextContents(), [
          '0 issued · 0 used · 0.00 revenue',
        ])
        await page.getByRole('link', { name: /Winter Fest/ }).click()
        await page.locator('[data-status]').filter({ hasText: 'Updated' }).waitFor()
        assert.equal(await page.locator('[data-gates-note]').textContent(), 'No uses yet.')
        assert.equal(await page.locator('[data-chart="gates"]').isVisible(), false)
        // The panel is its heading and note: lower than the 240-pixel chart it would otherwise hold.
        const panel = page.locator('section.panel', { has: page.locator('[data-chart="gates"]') })
        const box = await panel.boundingBox()
        const uses = await page
          .locator('section.panel', { has: page.locator('[data-chart="uses"]') })
          .boundingBox()
        assert.ok(box && uses && box.height < 240, `the empty gates panel is ${box?.height}px high`)
        await page.screenshot({
          path: artifact('dashboard-event-without-uses.png'),
          fullPage: true,
        })
      })

      test('no console errors, script errors or CSP violations on any page', () => {
        // The wrong-password answer (401) and the refused pages (403) log their status; nothing else may.
        const unexpected = problems.filter((p) => !/status of (401|403)/.test(p))
        assert.deepEqual(unexpected, [])
      })
    },
    ACTIVITY_ENV,
  )
}
