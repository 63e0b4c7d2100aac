// The scanner page (/scanner/) in a browser test: built afresh from its sources, driven as a gate uses it,
// and the service on a real port whose listener a test closes and opens again.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { Page } from 'playwright-core'
// @ts-expect-error: a plain ES module of the package (its build script), without type declarations.
import { buildPage } from '../../packages/scanner/build.mjs'
import { login, type TestApp } from './app.js'

/** Builds the page into a folder of its own (removed when the process exits); resolves to the folder. */
export async function builtScannerPage(): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-scanner-page-'))
  await buildPage(dir)
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** What the page shows in its status line's attributes. */
export interface PageStatus {
  state?: string
  known?: string
  pending?: string
  synced?: string
}

export async function pageStatus(page: Page): Promise<PageStatus> {
  const status = page.locator('#status')
  const out: PageStatus = {}
  for (const name of ['state', 'known', 'pending', 'synced'] as const) {
    const value = await status.getAttribute(`data-${name}`)
    if (value !== null) out[name] = value
  }
  return out
}

/** The little of the page's document the checks read (the tests' TypeScript has no DOM types). */
interface PageDocument {
  document: {
    documentElement: { dataset: Record<string, string | undefined> }
    querySelector(selector: string): { textContent: string | null } | null
  }
}

/** Waits until the page's service worker is ready (it then opens without the network). */
export async function offlineReady(page: Page): Promise<void> {
  await page.waitForFunction(
    () => (globalThis as unknown as PageDocument).document.documentElement.dataset.offlineReady === 'yes',
  )
}

/**
 * Types a code into the page's scan field as a gate's reader does (the code, then Enter); the answer
 * shown: its status (VALID, REFUSED, ALREADY_USED, …), a refusal's reason, and the text.
 */
export async function scanInPage(
  page: Page,
  code: string,
): Promise<{ status: string; reason: string; text: string }> {
  // The answer is cleared first, so that two equal answers in a row are told apart.
  await page.evaluate(() => {
    ;(globalThis as unknown as PageDocument).document.querySelector('#result')!.textContent = ''
  })
  await page.fill('#code', code)
  await page.press('#code', 'Enter')
  await page.waitForFunction(
    () => (globalThis as unknown as PageDocument).document.querySelector('#result')!.textContent !== '',
  )
  const result = page.locator('#result')
  return {
    status: (await result.getAttribute('data-status')) ?? '',
    reason: (await result.getAttribute('data-reason')) ?? '',
    text: (await result.textContent()) ?? '',
  }
}

/** The service on a port of its own, whose listener a test can close and open again (the app stays). */
export function listener(t: TestApp, port: number) {
  return {
    async open() {
      if (t.app.server.listening) return
      await new Promise<void>((resolve) => t.app.server.listen(port, '127.0.0.1', resolve))
    },
    async close() {
      const closed = new Promise((resolve) => t.app.server.close(resolve))
      t.app.server.closeAllConnections()
      await closed
    },
  }
}

/**
 * A set-up code for a device (by default the one the test seed registers for event 1), as an administrator
 * gets it: the address its QR code holds.
 */
export async function setupUrl(t: TestApp, devMac = 'AA:BB:CC:DD:EE:01'): Promise<string> {
  const device = await t.db.db
    .selectFrom('devices')
    .select('id')
    .where('dev_mac', '=', devMac)
    .executeTakeFirstOrThrow()
  const admin = (await login(t, 'root@example.com')).access_token
  const res = await t.request({ method: 'POST', url: `/devices/${device.id}/setup-code`, token: admin })
  assert.equal(res.statusCode, 200, res.body)
  return res.json().setup_url
}
