// The dashboard's gate page in Chromium: inside counts per check-in list and entries per hour, after the
// Friday of the check-in case table (test/helpers/checkin-cases.ts) scanned online.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { artifact, type ChromiumPage, openChromium } from '../../test/helpers/browser.js'
import { CHECKIN_CHECKPOINTS, CHECKIN_SCANS } from '../../test/helpers/checkin-cases.js'
import { type Festival, freshToken, setLocalTime, setUpFestival } from '../../test/helpers/festival.js'
import { seedPartner } from '../../test/helpers/partner.js'

const FRIDAY_NIGHT = CHECKIN_CHECKPOINTS[0]!

if (process.env.SKIP_BROWSER_TESTS === '1') {
  describe('the gate page in Chromium', { skip: 'SKIP_BROWSER_TESTS=1: browser tests SKIPPED' }, () => {})
} else {
  forEachBackend(httpBackends, 'the gate page in Chromium', (ctx) => {
    let t: TestApp
    let f: Festival
    let base: string
    let browser: ChromiumPage | undefined

    before(async () => {
      t = ctx()
      const keys = await seedPartner(t)
      f = await setUpFestival(t, keys.write)
      const operator = freshToken(t, 'op@example.com', 'operator')
      for (const s of CHECKIN_SCANS.filter((s) => s.at < FRIDAY_NIGHT.at)) {
        setLocalTime(t, s.at)
        await t.request({
          method: 'POST',
          url: `/tickets/${f.tickets[s.ticket].transfer_uid}/use`,
          token: await operator(),
          payload: {
            access_gate: s.list,
            ...(s.list === 'default' ? {} : { checkin_list_id: f.lists[s.list] }),
            direction: s.direction,
          },
        })
      }
      setLocalTime(t, FRIDAY_NIGHT.at)
      base = await t.app.listen({ host: '127.0.0.1', port: 0 })
      browser = await openChromium({ width: 1280, height: 900 })
    })

    after(async () => {
      await browser?.close()
    })

    test('from the event page to the gate: inside now per list, as the status route says, entries per hour', async () => {
      const { page, problems } = browser!
      await page.goto(`${base}/dashboard/login`)
      await page.getByLabel('Username or e-mail').fill('ev1@example.com')
      await page.getByLabel('Password').fill('s3cret-pass')
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.waitForLoadState('domcontentloaded')
      await page.goto(`${base}/dashboard/events/1`)
      await page.getByRole('link', { name: /The gate/ }).click()
      assert.equal(new URL(page.url()).pathname, '/dashboard/events/1/gate')
      assert.equal(await page.locator('h1').textContent(), 'Gate')
      for (const [key, counts] of Object.entries(FRIDAY_NIGHT.counts)) {
        const row = page.locator(`tr[data-list="${f.lists[key as keyof typeof f.lists]}"]`)
        assert.equal(Number(await row.locator('[data-inside]').textContent()), counts.inside, key)
      }
      const total = Object.values(FRIDAY_NIGHT.counts).reduce((n, c) => n + c.inside, 0)
      assert.equal(Number(await page.locator('[data-figure="inside"]').textContent()), total)
      assert.ok((await page.locator('figure.hours svg rect').count()) > 0, 'entries per hour drawn')
      assert.match(
        String(await page.locator('tr[data-list] [data-reason="product"]').first().textContent()),
        /wrong ticket type: \d/,
      )
      const shot = artifact('dashboard-gate.png')
      await page.screenshot({ path: shot, fullPage: true })
      if (process.env.UPDATE_DOCS_SCREENSHOT === '1' && ctx().config.databaseUrl.startsWith('sqlite'))
        fs.copyFileSync(shot, path.resolve('docs', 'dashboard-gate.png'))
      assert.deepEqual(
        problems.filter((x) => !/Failed to load resource/.test(x)),
        [],
      )
    })

    test('a dashboard user bound to a partner does not see the event-wide gate', async () => {
      const { page } = browser!
      await t.db.db
        .updateTable('dashboard_users')
        .set({ partner: 'Acme' })
        .where('username', '=', 'partner1')
        .execute()
      await page.context().clearCookies()
      await page.goto(`${base}/dashboard/login`)
      await page.getByLabel('Username or e-mail').fill('partner1')
      await page.getByLabel('Password').fill('s3cret-pass')
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.waitForLoadState('domcontentloaded')
      const res = await page.goto(`${base}/dashboard/events/1/gate`)
      assert.equal(res?.status(), 403)
    })
  })
}
