// The scanner page the service serves at /scanner/, in Debian's Chromium against the real service on a real
// port: set up from a set-up QR code's address, synced, then the network cut (the browser offline and the
// service's listener closed) and the page reloaded: its service worker opens it with its data, and it scans.
// Then an event of 500,000 tickets synced into IndexedDB, and one of them scanned after an offline reload.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { Page } from 'playwright-core'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { type ChromiumPage, openChromium } from '../../test/helpers/browser.js'
import { fillLedger } from '../../test/helpers/ledger.js'
import {
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerGet,
  seedPartner,
} from '../../test/helpers/partner.js'
import { freePort } from '../../test/helpers/processes.js'
import {
  builtScannerPage,
  listener,
  offlineReady,
  scanInPage as scan,
  setupUrl,
  pageStatus as status,
} from '../../test/helpers/scanner-page.js'
import { until, waitFor } from '../../test/helpers/until.js'

const pageDir = await builtScannerPage()

const skip = process.env.SKIP_BROWSER_TESTS === '1'
const port = await freePort()
const origin = `http://127.0.0.1:${port}`

if (skip) {
  describe('the scanner page in Chromium', { skip: 'SKIP_BROWSER_TESTS=1: browser tests SKIPPED' }, () => {})
} else {
  forEachBackend(
    httpBackends,
    'the scanner page in Chromium',
    (ctx) => {
      let t: TestApp
      let keys: PartnerKeys
      let browser: ChromiumPage | undefined
      let page: Page
      let server: ReturnType<typeof listener>

      before(async () => {
        t = ctx()
        keys = await seedPartner(t)
        await t.app.listen({ host: '127.0.0.1', port })
        server = listener(t, port)
        browser = await openChromium({ width: 800, height: 900 })
        page = browser.page
      })
      after(async () => {
        await browser?.close()
      })

      test('set up from its QR code, synced, then offline: a reload opens the page with its data, it scans, and uploads when the network is back', async () => {
        const type = await newTicketType(t, keys.write)
        const [a, b] = await Promise.all([newTransfer(t, keys.write, type), newTransfer(t, keys.write, type)])
        const codeOf = async (id: string) =>
          (await partnerGet(t, `/companies/transfer/${id}`, keys.read)).json().ticket_code as string
        const [codeA, codeB] = [await codeOf(a!.company_ticket_id), await codeOf(b!.company_ticket_id)]

        // What a phone's camera opens: the page, with the code in the fragment.
        const url = await setupUrl(t)
        assert.ok(url.startsWith(`${origin}/scanner/#setup=wbsu_`), url)
        await page.goto(url)
        const synced = await waitFor(
          async () => {
            const s = await status(page)
            // The page says "online" once the sync it started with has been stored: a moment after
            // the synced time and codes show (on a loaded machine the two were read in between, and
            // a background sync may be under way when the state is read): waited for, not read once.
            return s.synced !== undefined && Number(s.known) >= 2 && s.state === 'online' && s
          },
          60_000,
          'the first sync, the page online',
        )
        assert.ok(Number(synced.known) >= 2)
        // The fragment is gone from the address bar (and the history) once the code is exchanged.
        assert.equal(new URL(page.url()).hash, '')
        await offlineReady(page)
        await page.fill('#gate', 'Bühne Süd')
        await page.press('#gate', 'Enter')
        // The gate is stored (IndexedDB) after the Enter: the page marks it so once the write is done.
        await page.waitForSelector('#gate[data-saved="Bühne Süd"]', { state: 'attached' })

        // The network goes: the browser is offline and nothing listens on the service's port either.
        await browser!.context.setOffline(true)
        await server.close()
        await page.reload()
        await until('the page opened from its service worker', async () => {
          const s = await status(page)
          return s.state === 'offline' && Number(s.known) >= 2
        })
        assert.equal(await page.inputValue('#gate'), 'Bühne Süd')
        assert.equal((await scan(page, codeA)).status, 'VALID')
        const again = await scan(page, codeA)
        assert.equal(again.status, 'ALREADY_USED')
        assert.match(again.text, /Bühne Süd \(this scanner\)/)
        assert.equal((await scan(page, 'not a code')).status, 'FORGED')
        await page.reload()
        // A second reload, still offline: the queue is kept (the accepted scan and the refused second one,
        // which the service's scan log takes too: every event has check-in lists).
        await until('the queue kept across the reload', async () => (await status(page)).pending === '2')
        assert.equal((await scan(page, codeA)).status, 'ALREADY_USED')
        assert.equal((await scan(page, codeB)).status, 'VALID')

        // The network is back: the page uploads at its next sync.
        await server.open()
        await browser!.context.setOffline(false)
        await until(
          'the upload',
          async () => {
            const s = await status(page)
            return s.state === 'online' && s.pending === '0'
          },
          60_000,
        )
        const rows = await t.db.db
          .selectFrom('transfers')
          .select(['uid', 'status', 'used_gate'])
          .where('uid', 'in', [a!.transfer_uid, b!.transfer_uid])
          .execute()
        assert.deepEqual(Object.fromEntries(rows.map((r) => [r.uid, [r.status, r.used_gate]])), {
          [a!.transfer_uid]: ['USED', 'Bühne Süd'],
          [b!.transfer_uid]: ['USED', 'Bühne Süd'],
        })
        assert.deepEqual(
          browser!.problems.filter(
            (x) => !/Failed to load resource|ERR_INTERNET_DISCONNECTED|ERR_CONNECTION_REFUSED/.test(x),
          ),
          [],
        )
      })

      test('the page and its files: the page policy, revalidated on every load, /scanner goes to /scanner/', async () => {
        for (const file of ['/scanner/', '/scanner/app.js', '/scanner/app.css', '/scanner/sw.js']) {
          const res = await t.request({ method: 'GET', url: file })
          assert.equal(res.statusCode, 200, file)
          assert.equal(res.headers['cache-control'], 'no-cache', file)
          assert.match(String(res.headers['content-security-policy']), /script-src 'self'/, file)
        }
        const sw = await t.request({ method: 'GET', url: '/scanner/sw.js' })
        assert.match(String(sw.headers['content-type']), /javascript/)
        assert.doesNotMatch(sw.body, /__VERSION__/)
        const bare = await t.request({ method: 'GET', url: '/scanner' })
        assert.ok([301, 302, 308].includes(bare.statusCode), String(bare.statusCode))
        assert.equal(bare.headers.location, '/scanner/')
      })
    },
    { PUBLIC_BASE_URL: origin },
    () => ({ scannerPage: pageDir }),
  )

  /** An event this large is one of the biggest festivals; localStorage (about 5 MB) held some 67,000. */
  const TICKETS = 500_000

  // SQLite only: what is under test is the browser's storage, and the feed is the same on both backends
  // (src/edge/scan-sync-columns.test.ts); half a million rows on the shared PostgreSQL would be a load
  // of their own.
  forEachBackend(
    httpBackends.slice(0, 1),
    'the scanner page in Chromium, 500,000 tickets',
    (ctx) => {
      let t: TestApp
      let keys: PartnerKeys
      let browser: ChromiumPage | undefined

      before(async () => {
        t = ctx()
        keys = await seedPartner(t)
        await t.app.listen({ host: '127.0.0.1', port })
        browser = await openChromium({ width: 800, height: 900 })
      })
      after(async () => {
        await browser?.close()
      })

      test('500,000 tickets synced into IndexedDB; after an offline reload the page knows them all and scans one', async () => {
        const db = t.db.db
        const typeUid = await newTicketType(t, keys.write)
        const type = await db
          .selectFrom('ticket_types')
          .select('id')
          .where('uid', '=', typeUid)
          .executeTakeFirstOrThrow()
        // The crowd, written as the ledger would hold it.
        await fillLedger(db, { eventId: 1, ticketTypeId: type.id, count: TICKETS, now: t.clock.now() })
        // And one ticket of them issued through the partner API, with its real code.
        const mine = await newTransfer(t, keys.write, typeUid)
        const code = (await partnerGet(t, `/companies/transfer/${mine.company_ticket_id}`, keys.read)).json()
          .ticket_code as string

        const page = browser!.page
        await page.goto(await setupUrl(t))
        // A bound on a hang, not a speed: the first sync of half a million tickets on a shared machine.
        await until(
          'the first sync of every ticket',
          async () => Number((await status(page)).known) === TICKETS + 1,
          20 * 60_000,
        )
        await offlineReady(page)
        await browser!.context.setOffline(true)
        await listener(t, port).close()
        await page.reload()
        await until('the page opened offline with its data', async () => {
          const s = await status(page)
          return s.state === 'offline' && Number(s.known) === TICKETS + 1
        })
        assert.equal((await scan(page, code)).status, 'VALID')
        assert.equal((await scan(page, code)).status, 'ALREADY_USED')
      })
    },
    { PUBLIC_BASE_URL: origin },
    () => ({ scannerPage: pageDir }),
  )
}
