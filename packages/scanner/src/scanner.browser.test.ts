// End-to-end: the browser build of @wristband/scanner (built here from the sources with the package's own
// build script), in Debian's Chromium, against the real service on a real port, from a page of another
// origin (CORS), with the browser's network cut by context.setOffline(true).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { Page } from 'playwright-core'
import { forEachBackend, type TestApp } from '../../../test/helpers/app.js'
import { httpBackends } from '../../../test/helpers/backends.js'
import { type ChromiumPage, openChromium } from '../../../test/helpers/browser.js'
import {
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerGet,
  partnerPost,
  seedPartner,
} from '../../../test/helpers/partner.js'
import { freePort } from '../../../test/helpers/processes.js'
// @ts-expect-error: a plain ES module of the package (its build script), without type declarations.
import { buildBrowser } from '../build.mjs'

/** The page a browser scanner app would be: the bundle and nothing else, state in localStorage. */
const ESM_PAGE = `<!doctype html><meta charset="utf-8"><title>scanner</title>
<script type="module">
import { Scanner } from './scanner.mjs'
window.make = (options) => {
  const saved = localStorage.getItem('scanner')
  window.scanner = new Scanner({ ...options, ...(saved ? { state: JSON.parse(saved) } : {}) })
  return window.scanner.pending
}
window.save = () => localStorage.setItem('scanner', JSON.stringify(window.scanner.exportState()))
window.syncNow = () =>
  window.scanner.sync().then((r) => r, (e) => ({ used: [], error: { kind: e.kind, message: e.message } }))
window.scanNow = (code) => window.scanner.scan(code)
window.loaded = 'esm'
</script>`
/** The same application after its upgrade: the state in IndexedDB, moved there from localStorage once. */
const IDB_PAGE = `<!doctype html><meta charset="utf-8"><title>scanner</title>
<script type="module">
import { Scanner, openIndexedDbStorage } from './scanner.mjs'
window.make = async (options) => {
  const storage = await openIndexedDbStorage({ fromLocalStorage: 'scanner' })
  window.scanner = await Scanner.open({ ...options, storage })
  return window.scanner.pending
}
window.legacy = () => localStorage.getItem('scanner')
window.syncNow = () =>
  window.scanner.sync().then((r) => r, (e) => ({ used: [], error: { kind: e.kind, message: e.message } }))
window.scanNow = (code) => window.scanner.scan(code)
window.loaded = 'idb'
</script>`
const IIFE_PAGE = `<!doctype html><meta charset="utf-8"><title>scanner</title>
<script src="./scanner.iife.js"></script>
<script>
window.make = (options) => { window.scanner = new WristbandScanner.Scanner(options); return 0 }
window.syncNow = () =>
  window.scanner.sync().then((r) => r, (e) => ({ used: [], error: { kind: e.kind, message: e.message } }))
window.scanNow = (code) => window.scanner.scan(code)
window.loaded = typeof WristbandScanner.Scanner === 'function' ? 'iife' : 'missing'
</script>`

const pagePort = await freePort()
const PAGE_ORIGIN = `http://127.0.0.1:${pagePort}`

type Outcome = { status: string } & Record<string, unknown>

if (process.env.SKIP_BROWSER_TESTS === '1') {
  describe('the scanner in Chromium', { skip: 'SKIP_BROWSER_TESTS=1: browser tests SKIPPED' }, () => {})
} else {
  forEachBackend(
    httpBackends,
    'the scanner in Chromium',
    (ctx) => {
      let t: TestApp
      let keys: PartnerKeys
      let service: string
      let browser: ChromiumPage | undefined
      let page: Page
      let pages: http.Server
      let dir: string
      let token: string

      before(async () => {
        t = ctx()
        keys = await seedPartner(t)
        service = await t.app.listen({ host: '127.0.0.1', port: 0 })
        dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-scanner-browser-'))
        const { esm, iife } = await buildBrowser(dir)
        const files: Record<string, [string, string]> = {
          '/': [ESM_PAGE, 'text/html'],
          '/iife.html': [IIFE_PAGE, 'text/html'],
          '/idb.html': [IDB_PAGE, 'text/html'],
          '/scanner.mjs': [fs.readFileSync(esm, 'utf8'), 'text/javascript'],
          '/scanner.iife.js': [fs.readFileSync(iife, 'utf8'), 'text/javascript'],
        }
        pages = http.createServer((req, res) => {
          const file = files[req.url ?? '']
          if (!file) return void res.writeHead(404).end()
          res.writeHead(200, { 'content-type': `${file[1]}; charset=utf-8` }).end(file[0])
        })
        await new Promise<void>((resolve) => pages.listen(pagePort, '127.0.0.1', resolve))
        browser = await openChromium({ width: 800, height: 600 })
        page = browser.page
        // The device with a key: a key-less one holds no sync:* scope.
        const deviceKey = 'wbd_scanner-browser-test-key-01234'
        await t.seed({
          devices: [
            {
              dev_mac: 'AA:BB:CC:DD:EE:01',
              event_id: 1,
              operator_email: 'op@example.com',
              device_key: deviceKey,
            },
          ],
        })
        const login = await t.request({
          method: 'POST',
          url: '/auth/login/device',
          payload: { dev_mac: 'AA:BB:CC:DD:EE:01', event_id: 1, device_key: deviceKey },
        })
        assert.equal(login.statusCode, 200, login.body)
        token = login.json().offline_token
      })

      after(async () => {
        await browser?.close()
        await new Promise((resolve) => pages?.close(resolve))
        if (dir) fs.rmSync(dir, { recursive: true, force: true })
      })

      /** The page's globals (the functions its script defines). */
      type PageGlobals = {
        loaded?: string
        make(o: unknown): number | Promise<number>
        save(): void
        syncNow(): Promise<{ used: string[]; error?: { kind: string; message: string } }>
        scanNow(code: string): Promise<Outcome>
      }
      const open = async (url: string, kind: 'esm' | 'iife' | 'idb') => {
        await page.goto(url)
        await page.waitForFunction(() => (globalThis as unknown as PageGlobals).loaded !== undefined)
        assert.equal(await page.evaluate(() => (globalThis as unknown as PageGlobals).loaded), kind)
        return page.evaluate((o) => (globalThis as unknown as PageGlobals).make({ ...o, gate: 'Browser' }), {
          baseUrl: service,
          eventId: 1,
          token,
        })
      }
      const sync = () => page.evaluate(() => (globalThis as unknown as PageGlobals).syncNow())
      const scan = (code: string) =>
        page.evaluate((c) => (globalThis as unknown as PageGlobals).scanNow(c), code)
      const codeOf = async (companyTicketId: string, key = keys.read) =>
        (await partnerGet(t, `/companies/transfer/${companyTicketId}`, key)).json().ticket_code as string

      test('offline in Chromium: sync, cut, VALID, ALREADY_USED, REVOKED, WRONG_EVENT, FORGED; the queue survives a reload and uploads after reconnect', async () => {
        const type = await newTicketType(t, keys.write)
        const [a, b, r] = await Promise.all([1, 2, 3].map(() => newTransfer(t, keys.write, type)))
        const otherType = await newTicketType(t, keys.other, 'winter-fest-2026')
        const w = await newTransfer(t, keys.other, otherType, {}, 'winter-fest-2026')
        const [codeA, codeB, oldR, codeW] = await Promise.all([
          codeOf(a!.company_ticket_id),
          codeOf(b!.company_ticket_id),
          codeOf(r!.company_ticket_id),
          codeOf(w.company_ticket_id, keys.other),
        ])
        assert.equal(await open(`${PAGE_ORIGIN}/`, 'esm'), 0)
        assert.equal((await sync()).error, undefined)
        const reissued = await partnerPost(
          t,
          `/companies/transfer/${r!.company_ticket_id}/reissue`,
          keys.write,
          undefined,
        )
        assert.equal(reissued.statusCode, 200, reissued.body)
        assert.equal((await sync()).error, undefined)

        await browser!.context.setOffline(true)
        const offline = await sync()
        assert.equal(offline.error?.kind, 'network')
        assert.match(offline.error!.message, /^network unreachable/)
        assert.equal((await scan(codeA)).status, 'VALID')
        const again = await scan(codeA)
        assert.deepEqual([again.status, again.source, again.gate], ['ALREADY_USED', 'device', 'Browser'])
        assert.equal((await scan(oldR)).status, 'REVOKED')
        assert.deepEqual(await scan(codeW), {
          status: 'WRONG_EVENT',
          transfer_uid: w.transfer_uid,
          event_id: 2,
        })
        const [h, p, sig] = codeB.split('.')
        const altered = `${h}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p!, 'base64url').toString()), n: 9 })).toString('base64url')}.${sig}`
        assert.equal((await scan(altered)).status, 'FORGED')
        assert.equal((await scan('not a code')).status, 'FORGED')
        assert.equal((await scan(codeB)).status, 'VALID')
        await page.evaluate(() => (globalThis as unknown as PageGlobals).save())

        // The network is back; the page reloads (a restart) and finds its queue in localStorage: the two
        // accepted scans, and the refused repeat and revoked code (the service has check-in lists, so
        // refusals go up to its scan log too).
        await browser!.context.setOffline(false)
        assert.equal(await open(`${PAGE_ORIGIN}/`, 'esm'), 4)
        const report = await sync()
        assert.equal(report.error, undefined)
        assert.deepEqual(report.used.sort(), [a!.transfer_uid, b!.transfer_uid].sort())
        const rows = await t.db.db
          .selectFrom('transfers')
          .select(['uid', 'status', 'used_gate'])
          .where('uid', 'in', [a!.transfer_uid, b!.transfer_uid, r!.transfer_uid])
          .execute()
        assert.deepEqual(Object.fromEntries(rows.map((x) => [x.uid, [x.status, x.used_gate]])), {
          [a!.transfer_uid]: ['USED', 'Browser'],
          [b!.transfer_uid]: ['USED', 'Browser'],
          [r!.transfer_uid]: ['TRANSFERRED', null],
        })
        assert.deepEqual(
          browser!.problems.filter((x) => !/Failed to load resource|ERR_INTERNET_DISCONNECTED/.test(x)),
          [],
        )
      })

      test('an application that kept the state in localStorage, upgraded to IndexedDB: the state moves over once, scans answer as before, localStorage is cleared', async () => {
        const type = await newTicketType(t, keys.write)
        const [a, b] = await Promise.all([1, 2].map(() => newTransfer(t, keys.write, type)))
        const [codeA, codeB] = await Promise.all([codeOf(a!.company_ticket_id), codeOf(b!.company_ticket_id)])
        // The application as it was: its state saved as JSON in localStorage (from an empty start).
        await page.goto(`${PAGE_ORIGIN}/`)
        await page.evaluate('localStorage.clear()')
        assert.equal(await open(`${PAGE_ORIGIN}/`, 'esm'), 0)
        assert.equal((await sync()).error, undefined)
        await browser!.context.setOffline(true)
        assert.equal((await scan(codeA)).status, 'VALID')
        await page.evaluate(() => (globalThis as unknown as PageGlobals).save())
        const known = JSON.parse((await page.evaluate("localStorage.getItem('scanner')")) as string)
        assert.equal(known.queue.length, 1)

        // The upgrade: the page loads (online), takes the state over into IndexedDB, and scans offline.
        await browser!.context.setOffline(false)
        assert.equal(await open(`${PAGE_ORIGIN}/idb.html`, 'idb'), 1)
        assert.equal(await page.evaluate("localStorage.getItem('scanner')"), null)
        await browser!.context.setOffline(true)
        const again = await scan(codeA)
        assert.deepEqual([again.status, again.source, again.gate], ['ALREADY_USED', 'device', 'Browser'])
        assert.equal((await scan(codeB)).status, 'VALID')

        // Loaded again, the state is IndexedDB's alone (both accepted scans and the refused repeat queued);
        // then the network returns and they are uploaded.
        await browser!.context.setOffline(false)
        assert.equal(await open(`${PAGE_ORIGIN}/idb.html`, 'idb'), 3)
        assert.equal((await scan(codeB)).status, 'ALREADY_USED')
        const report = await sync()
        assert.equal(report.error, undefined)
        assert.deepEqual(report.used.sort(), [a!.transfer_uid, b!.transfer_uid].sort())
        const rows = await t.db.db
          .selectFrom('transfers')
          .select(['uid', 'status'])
          .where('uid', 'in', [a!.transfer_uid, b!.transfer_uid])
          .execute()
        assert.deepEqual(
          rows.map((r) => r.status),
          ['USED', 'USED'],
        )
      })

      test('a page whose origin CORS_ORIGINS does not allow is told so, not "service unreachable"', async () => {
        await open(`http://localhost:${pagePort}/`, 'esm')
        const blocked = await sync()
        assert.equal(blocked.error?.kind, 'cors')
        assert.match(blocked.error!.message, /^blocked by CORS: set CORS_ORIGINS/)
      })

      test('the IIFE build works from a plain <script>', async () => {
        await open(`${PAGE_ORIGIN}/iife.html`, 'iife')
        assert.equal((await sync()).error, undefined)
        assert.equal((await scan('not a code')).status, 'FORGED')
      })
    },
    { CORS_ORIGINS: PAGE_ORIGIN },
  )
}
