// examples/ stays true: the seed file loads and the walkthrough runs against the built service.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { TEST_SECRET } from '../../test/helpers/app.js'
import { wristband } from '../../test/helpers/cli.js'
import { freePort, killProcess } from '../../test/helpers/processes.js'
import { until } from '../../test/helpers/until.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const EXAMPLES = path.join(ROOT, 'examples')

describe('examples/', () => {
  let dir: string
  let port: number
  let service: ChildProcess | undefined
  let log = ''
  let env: Record<string, string>
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-examples-'))
    port = await freePort()
    // The walkthrough's webhook receiver listens on 127.0.0.1.
    env = { DATA_DIR: dir, JWT_SECRET: TEST_SECRET, WEBHOOK_ALLOW_PRIVATE: 'true', PORT: String(port) }
  })
  after(async () => {
    if (service) await killProcess(service)
    fs.rmSync(dir, { recursive: true, force: true })
  })

  test('wristband seed examples/seed.json loads it and prints no password', async () => {
    const run = await wristband(['seed', path.join(EXAMPLES, 'seed.json')], env)
    assert.equal(run.code, 0, run.stderr)
    const out = JSON.parse(run.stdout)
    assert.ok(out.administrators.every((a: { id: number }) => Number.isInteger(a.id)))
    assert.doesNotMatch(run.stdout, /change-me/)
  })

  test('walkthrough.mjs goes from sign-in and verify to the partner flow and its signed webhook', async () => {
    service = spawn(process.execPath, [path.join(ROOT, 'bin', 'wristband.js'), 'serve'], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    service.stdout!.on('data', (d) => {
      log += d
    })
    await until('the service to listen', () => log.includes('wristband is serving'), 30_000)
    const walk = spawn(process.execPath, [path.join(EXAMPLES, 'walkthrough.mjs')], {
      env: { PATH: process.env.PATH ?? '', BASE_URL: `http://127.0.0.1:${port}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    walk.stdout.on('data', (d) => {
      out += d
    })
    walk.stderr.on('data', (d) => {
      out += d
    })
    const code = await new Promise((resolve) => walk.on('close', resolve))
    assert.equal(code, 0, out)
    for (const step of [
      'POST /auth/login -> 200',
      'POST /tokens/verify -> 200',
      'POST /tokens/api-key -> 200',
      'PUT /companies/webhook -> 200',
      'POST /companies/ticket -> 201',
      'POST /companies/transfer -> 201',
      '/use -> 200',
      '/use -> 409',
      'signature valid',
      'walkthrough complete',
    ])
      assert.ok(out.includes(step), `missing "${step}" in:\n${out}`)
  })
})
