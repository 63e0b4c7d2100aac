// The webhook deliveries page in Debian's Chromium (playwright-core), against the service on a real port.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { Page } from 'playwright-core'
import { ACTIVITY_ENV, type Activity, createActivity } from '../../test/helpers/activity.js'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { artifact, type ChromiumPage, openChromium } from '../../test/helpers/browser.js'
import { until } from '../../test/helpers/until.js'

if (process.env.SKIP_BROWSER_TESTS === '1') {
  describe('webhook deliveries page in Chromium', {
    skip: 'SKIP_BROWSER_TESTS=1: browser tests SKIPPED',
  }, () => {})
} else {
  forEachBackend(
    httpBackends,
    'webhook deliveries page in Chromium',
    (ctx) => {
      let t: TestApp
      let activity: Activity
      let base: string
      let browser: ChromiumPage | undefined
      let page: Page
      let problems: string[] = []

      before(async () => {
        t = ctx()
        activity = await createActivity(t)
        base = await t.app.listen({ host: '127.0.0.1', port: 0 })
        browser = await openChromium({ width: 1280, height: 800 })
        ;({ page, problems } = browser)
      })

      after(async () => {
        await browser?.close()
        await activity?.receiver.close()
      })

      const rows = () =>
        page
          .locator('table.deliveries tbody tr[data-delivery]')
          .evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-status')))

      test('from the event page to its deliveries: every attempt with time, HTTP status and excerpt', async () => {
        await page.goto(`${base}/dashboard/login`)
        await page.getByLabel('Username or e-mail').fill('partner1')
        await page.getByLabel('Password').fill('s3cret-pass')
        await page.getByRole('button', { name: 'Sign in' }).click()
        await page.waitForLoadState('domcontentloaded')
        await page.goto(`${base}/dashboard/events/1`)
        await page.getByRole('link', { name: /Every delivery/ }).click()
        assert.equal(new URL(page.url()).pathname, '/dashboard/events/1/webhooks')
        assert.equal(await page.locator('h1').textContent(), 'Webhook deliveries')
        // Four notifications: two delivered, two answered 503 and waiting for their retry.
        assert.deepEqual((await rows()).sort(), ['delivered', 'delivered', 'pending', 'pending'])
        const pending = page.locator('tr[data-status="pending"]').first()
        assert.match(String(await pending.locator('[data-attempt]').textContent()), /UTC\s*·\s*HTTP 503/)
        assert.match(
          String(await pending.locator('td').nth(4).textContent()),
          /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/,
        )
        const shot = artifact('dashboard-webhook-deliveries.png')
        await page.screenshot({ path: shot, fullPage: true })
        if (process.env.UPDATE_DOCS_SCREENSHOT === '1' && ctx().config.databaseUrl.startsWith('sqlite'))
          fs.copyFileSync(shot, path.resolve('docs', 'dashboard-webhook-deliveries.png'))
      })

      test('the status filter narrows the list', async () => {
        await page.getByRole('link', { name: 'Delivered', exact: true }).click()
        assert.equal(new URL(page.url()).searchParams.get('status'), 'delivered')
        assert.deepEqual(await rows(), ['delivered', 'delivered'])
        await page.getByRole('link', { name: 'Pending', exact: true }).click()
        assert.deepEqual(await rows(), ['pending', 'pending'])
        await page.getByRole('link', { name: 'Failed', exact: true }).click()
        assert.deepEqual(await rows(), [])
        await page.getByRole('link', { name: 'All', exact: true }).click()
        assert.equal((await rows()).length, 4)
      })

      test('Resend sends a failing delivery again at once and says so', async () => {
        const before = activity.receiver.log.length
        const row = page.locator('tr[data-status="pending"]').first()
        const id = await row.getAttribute('data-delivery')
        await row.getByRole('button', { name: 'Resend' }).click()
        await page.waitForLoadState('domcontentloaded')
        assert.equal(new URL(page.url()).searchParams.get('resent'), id)
        assert.match(
          String(await page.getByRole('status').textContent()),
          new RegExp(`Delivery #${id} is being sent again`),
        )
        // The receiver's script is used up: it now answers 200.
        await until('the resent attempt to arrive', () => activity.receiver.log.length === before + 1)
        await until('the delivery to show as delivered', async () => {
          await page.reload()
          return (await page.locator(`tr[data-delivery="${id}"]`).getAttribute('data-status')) === 'delivered'
        })
        assert.equal(await page.locator(`tr[data-delivery="${id}"] [data-attempt]`).count(), 2)
      })

      test("another event's deliveries are refused", async () => {
        const res = await page.goto(`${base}/dashboard/events/2/webhooks`)
        assert.equal(res?.status(), 403)
        assert.equal(await page.locator('h1').textContent(), 'Not allowed')
      })

      test('no console errors, script errors or CSP violations', () => {
        assert.deepEqual(
          problems.filter((p) => !/status of 403/.test(p)),
          [],
        )
      })
    },
    ACTIVITY_ENV,
  )
}
