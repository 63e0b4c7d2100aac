import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { type BrowserContext, chromium, type Page } from 'playwright-core'

/** Debian's Chromium (`apt-get install -y chromium`; scripts/ci-system-deps.sh installs it in CI). */
export const CHROMIUM = '/usr/bin/chromium'

/** Flags for a headless Chromium that talks to nothing but the service under test. */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
]

/** Where browser tests write their screenshots. */
const ARTIFACTS = path.resolve('test-artifacts')

/** The path of a screenshot named `name` in the artifacts folder (created if missing). */
export function artifact(name: string): string {
  fs.mkdirSync(ARTIFACTS, { recursive: true })
  return path.join(ARTIFACTS, name)
}

export interface ChromiumPage {
  context: BrowserContext
  page: Page
  /** Console errors and page errors, CSP violations included. */
  problems: string[]
  /** Closes the browser and removes its profile. */
  close(): Promise<void>
}

/**
 * Chromium with a fresh profile and one page, in a fixed locale and time zone (en-US, UTC) so pages
 * render the same everywhere, collecting what the page reports as errors. A missing Chromium fails
 * the suite with how to install it.
 */
export async function openChromium(viewport: { width: number; height: number }): Promise<ChromiumPage> {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} is missing: install it with \`apt-get install -y chromium\` (scripts/ci-system-deps.sh does), or set SKIP_BROWSER_TESTS=1 to skip the browser tests`,
    )
  }
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-chromium-'))
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    args: CHROMIUM_ARGS,
    headless: true,
    viewport,
    locale: 'en-US',
    timezoneId: 'UTC',
  })
  const page = context.pages()[0] ?? (await context.newPage())
  const problems: string[] = []
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text())
  })
  page.on('pageerror', (e) => problems.push(e.message))
  return {
    context,
    page,
    problems,
    async close() {
      await context.close()
      fs.rmSync(userDataDir, { recursive: true, force: true })
    },
  }
}
