// examples/ stays true: the seed file loads and the walkthrough runs against the built service.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { TEST_SECRET } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { wristband } from '../../test/helpers/cli.js'
import { freePort, killProcess } from '../../test/helpers/processes.js'
import { until } from '../../test/helpers/until.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const EXAMPLES = path.join(ROOT, 'examples')
const postgres = httpBackends.find((b) => b.name.startsWith('postgres'))!

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

  /** Runs examples/walkthrough.mjs against `wristband serve` with `extra` settings and arguments. */
  async function walkthrough(extra: Record<string, string>, args: string[] = []): Promise<void> {
    service = spawn(process.execPath, [path.join(ROOT, 'bin', 'wristband.js'), 'serve', ...args], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', ...env, ...extra },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    log = ''
    service.stdout!.on('data', (d) => {
      log += d
    })
    await until('the service to listen', () => log.includes('wristband is serving'), 60_000)
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
    await killProcess(service)
    service = undefined
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
  }

  test("the walkthrough's receiver keeps a notification that arrived before next() was called", {
    timeout: 30_000,
  }, async () => {
    const { startReceiver } = (await import(path.join(EXAMPLES, 'receiver.mjs'))) as {
      startReceiver(): Promise<{
        url: string
        next(): Promise<{ body: string }>
        count(): number
        close(): void
      }>
    }
    const receiver = await startReceiver()
    try {
      const post = (body: string) => fetch(receiver.url, { method: 'POST', body })
      assert.equal((await post('early')).status, 200)
      await until('the notification to arrive', () => receiver.count() === 1)
      assert.equal((await receiver.next()).body, 'early')
      const later = receiver.next()
      await post('later')
      assert.equal((await later).body, 'later')
    } finally {
      receiver.close()
    }
  })

  test('walkthrough.mjs goes from sign-in and verify to the partner flow and its signed webhook', async () => {
    await walkthrough({})
  })

  // The production set-up of the README: PostgreSQL, Redis, two workers. The use notification is
  // usually there before the walkthrough asks for it; its receiver must not miss it.
  test('walkthrough.mjs on PostgreSQL, Redis and two workers', {
    ...(postgres.skip || !process.env.TEST_REDIS_URL
      ? { skip: 'TEST_DATABASE_URL and TEST_REDIS_URL are not both set' }
      : {}),
  }, async () => {
    const p = await postgres.provision()
    try {
      const seeded = await wristband(['seed', path.join(EXAMPLES, 'seed.json')], { ...env, ...p.env })
      assert.equal(seeded.code, 0, seeded.stderr)
      await walkthrough({ ...p.env, DATA_DIR: dir }, ['--workers', '2'])
    } finally {
      await p.dispose()
    }
  })
})
