import path from 'node:path'

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
export const ARTIFACTS = path.resolve('test-artifacts')
