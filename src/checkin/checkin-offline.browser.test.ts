// The check-in case table (test/helpers/checkin-cases.ts) offline in Chromium: the scanner page the service
// serves at /scanner/, set up and synced from the service on a real port, then the network cut (the
// browser offline and the service's listener closed) and the page reloaded from its service worker with
// its IndexedDB data. Every scan of the table is made in the page, on its list and direction, at its time
// (the browser's clock), and answered by the rule module as bundled into the page; at each checkpoint the
// network comes back, the page uploads, and the service's counts are the table's.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { Page } from 'playwright-core'
import { epochOfLocal } from '../../src/platform/formats.js'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { type ChromiumPage, openChromium } from '../../test/helpers/browser.js'
import {
  CHECKIN_CHECKPOINTS,
  CHECKIN_SCANS,
  CHECKIN_TICKETS,
  CHECKIN_TIMEZONE,
} from '../../test/helpers/checkin-cases.js'
import {
  checkinOutcome,
  type Festival,
  festivalCounts,
  setLocalTime,
  setUpFestival,
} from '../../test/helpers/festival.js'
import { seedPartner } from '../../test/helpers/partner.js'
import { freePort } from '../../test/helpers/processes.js'
import {
  builtScannerPage,
  listener,
  offlineReady,
  pageStatus,
  scanInPage,
  setupUrl,
} from '../../test/helpers/scanner-page.js'
import { until, waitFor } from '../../test/helpers/until.js'

const TICKETS = Object.keys(CHECKIN_TICKETS).length
const skip = process.env.SKIP_BROWSER_TESTS === '1'
const pageDir = skip ? '' : await builtScannerPage()
const port = await freePort()
const origin = `http://127.0.0.1:${port}`

if (skip) {
  describe('check-in lists: the case table offline in Chromium', {
    skip: 'SKIP_BROWSER_TESTS=1: browser tests SKIPPED',
  }, () => {})
} else {
  forEachBackend(
    httpBackends,
    'check-in lists: the case table offline in Chromium',
    (ctx) => {
      let t: TestApp
      let f: Festival
      let browser: ChromiumPage | undefined
      let page: Page
      let server: ReturnType<typeof listener>

      /** The browser's clock at an event-local time of the table (the page's scans are dated by it). */
      const browserAt = (local: string) =>
        browser!.context.clock.setFixedTime(epochOfLocal(local, CHECKIN_TIMEZONE))

      /** The network gone, and the page opened again from its service worker with its data. */
      const cutAndReload = async () => {
        await browser!.context.setOffline(true)
        await server.close()
        await page.reload()
        await until('the page opened offline with its data', async () => {
          const s = await pageStatus(page)
          return s.state === 'offline' && Number(s.known) === TICKETS
        })
      }

      before(async () => {
        t = ctx()
        const keys = await seedPartner(t)
        f = await setUpFestival(t, keys.write)
        // The first sync at the true time: every answer of the service, the key set's too, is dated by
        // its clock then, and the page's clock is the machine's (no offset to correct).
        t.clock.advance(Date.now() - t.clock.now())
        await t.app.listen({ host: '127.0.0.1', port })
        server = listener(t, port)
        browser = await openChromium({ width: 800, height: 900 })
        page = browser.page
      })
      after(async () => {
        await browser?.close()
      })

      test('every case answered in the page as the table says, offline after a reload; the counts at each checkpoint after the uploads', async () => {
        await page.goto(await setupUrl(t))
        await waitFor(
          async () => {
            const s = await pageStatus(page)
            return s.synced !== undefined && Number(s.known) === TICKETS && s.state === 'online'
          },
          60_000,
          'the first sync',
        )
        await offlineReady(page)
        // The page offers every list of the event, the default list first and chosen.
        const options = await page.locator('#list option').evaluateAll((os) =>
          os.map((o) => {
            const option = o as unknown as { value: string; selected: boolean }
            return [Number(option.value), option.selected] as const
          }),
        )
        assert.deepEqual(
          options.map(([id]) => id).sort(),
          Object.values(f.lists).sort(),
          'the feed carried every list to the page',
        )
        assert.deepEqual(options[0], [f.lists.default, true])

        // From here the service's clock moves only with the table (an upload's answers are dated by it,
        // and the page corrects its clock by them: they must agree to the second with the browser's).
        t.clock.freeze()
        // The browser's clock is the table's from the reload on (the page's scanner takes its clock when made).
        await browserAt(CHECKIN_SCANS[0]!.at)
        await cutAndReload()
        const checkpoints = [...CHECKIN_CHECKPOINTS]
        const upload = async (at: string) => {
          await browserAt(at)
          setLocalTime(t, at)
          await server.open()
          await browser!.context.setOffline(false)
          await page.click('#sync-now')
          await until(
            `the upload at ${at}`,
            async () => {
              const s = await pageStatus(page)
              return s.state === 'online' && s.pending === '0'
            },
            60_000,
          )
          assert.deepEqual(await festivalCounts(t, f), checkpoints.shift()!.counts, `counts at ${at}`)
        }
        for (const s of CHECKIN_SCANS) {
          while (checkpoints.length && checkpoints[0]!.at < s.at) {
            await upload(checkpoints[0]!.at)
            await cutAndReload()
          }
          await browserAt(s.at)
          await page.selectOption('#list', String(f.lists[s.list]))
          await page.selectOption('#direction', s.direction)
          const r = await scanInPage(page, f.tickets[s.ticket].code)
          assert.equal(checkinOutcome(r), s.expect, `${s.at} ${s.ticket} ${s.direction} ${s.list}: ${r.text}`)
        }
        while (checkpoints.length) await upload(checkpoints[0]!.at)

        const log = await t.request({
          method: 'GET',
          url: '/events/1/checkins?limit=500',
          token: await f.admin(),
        })
        assert.equal(log.statusCode, 200, log.body)
        const scans = log.json().checkins as { transfer_uid: string; offline: boolean; first_use: boolean }[]
        assert.equal(scans.length, CHECKIN_SCANS.length, 'every scan in the log, refused ones too')
        for (const c of scans) assert.equal(c.offline, true)
        assert.deepEqual(
          scans
            .filter((c) => c.first_use)
            .map((c) => c.transfer_uid)
            .sort(),
          CHECKIN_SCANS.filter((s) => s.first_use)
            .map((s) => f.tickets[s.ticket].transfer_uid)
            .sort(),
          'each ticket used once, by its first entry',
        )
        assert.deepEqual(
          browser!.problems.filter(
            (x) => !/Failed to load resource|ERR_INTERNET_DISCONNECTED|ERR_CONNECTION_REFUSED/.test(x),
          ),
          [],
        )
      })
    },
    { PUBLIC_BASE_URL: origin, OFFLINE_TOKEN_EXPIRE_HOURS: '72' },
    () => ({ scannerPage: pageDir }),
  )
}
