// `prepare` without the compiler: what `npm ci --omit=dev` on a clone meets. The whole production
// path on a fresh clone (npm ci, npm prune --omit=dev, serve, SIGTERM) is scripts/production-install-test.sh,
// which CI runs (it installs from the registry, too slow for the test suite).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'

const PREPARE = fileURLToPath(new URL('../scripts/prepare.mjs', import.meta.url))

describe('prepare without the dev dependencies', () => {
  let dir: string
  before(() => {
    // A folder with no node_modules above it that holds TypeScript.
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-prepare-'))
  })
  after(() => fs.rmSync(dir, { recursive: true, force: true }))

  test('with nothing built, it fails with one line naming the production path', () => {
    const run = spawnSync(process.execPath, [PREPARE], { cwd: dir, encoding: 'utf8' })
    assert.equal(run.status, 1)
    const lines = run.stderr.trim().split('\n')
    assert.equal(lines.length, 1, run.stderr)
    assert.match(
      lines[0]!,
      /TypeScript \(a dev dependency\) is not installed.*`npm ci`, then `npm prune --omit=dev`/,
    )
  })

  test('with dist/ already built (a build stage), it keeps it and succeeds', () => {
    fs.mkdirSync(path.join(dir, 'dist', 'src'), { recursive: true })
    fs.writeFileSync(path.join(dir, 'dist', 'src', 'cli.js'), '')
    const run = spawnSync(process.execPath, [PREPARE], { cwd: dir, encoding: 'utf8' })
    assert.equal(run.status, 0, run.stderr)
  })
})
