import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { Agent } from 'undici'
import { TEST_SECRET } from '../../test/helpers/app.js'
import { freePort, isRunning, LoggedProcess } from '../../test/helpers/processes.js'
import { until } from '../../test/helpers/until.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const BIN = path.join(ROOT, 'bin', 'wristband.js')
const redisUrl = process.env.TEST_REDIS_URL

/** Drain period of these tests: the default, long enough that two requests in a row fall inside it. */
const DRAIN_SECONDS = 5
/** The promise of the issue: exit within drain + 10 s (a bound on a hang, not a measured speed). */
const EXIT_BOUND_MS = (DRAIN_SECONDS + 10) * 1000
/** Bounds a hang at start (npm start compiles first, on a machine that may be busy), not a speed. */
const START_BOUND_MS = 240_000

const dirs: string[] = []
after(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true })
})

interface Started {
  service: LoggedProcess
  port: number
  dir: string
}

async function startService(command: string[], env: Record<string, string>, cwd?: string): Promise<Started> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-shutdown-'))
  const port = await freePort()
  const child = spawn(command[0]!, command.slice(1), {
    cwd: cwd ?? dir,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? dir,
      DATA_DIR: dir,
      HOST: '127.0.0.1',
      PORT: String(port),
      JWT_SECRET: TEST_SECRET,
      LOG_LEVEL: 'info',
      SHUTDOWN_DRAIN_SECONDS: String(DRAIN_SECONDS),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const service = new LoggedProcess(child)
  await until(
    `the service on port ${port} to be ready`,
    async () => {
      if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}: ${service.stderr}`)
      try {
        return (await fetch(`http://127.0.0.1:${port}/ready`)).status === 200
      } catch {
        return false
      }
    },
    START_BOUND_MS,
  )
  return { service, port, dir }
}

/** The pids of the processes that wrote log lines: the service's own (one, or every worker). */
function servingPids(service: LoggedProcess): number[] {
  return [
    ...new Set(
      service.lines.filter((l) => String(l.msg).startsWith('Server listening')).map((l) => Number(l.pid)),
    ),
  ]
}

/**
 * The graceful stop as a load balancer sees it: /ready turns 503 at once, every other route keeps
 * answering through the drain period, then the process exits 0 and nothing of it keeps running.
 */
async function assertGracefulStop({ service, port }: Started, signalled: () => void): Promise<void> {
  const origin = `http://127.0.0.1:${port}`
  const pids = servingPids(service)
  assert.ok(pids.length > 0, JSON.stringify(service.lines))
  signalled()
  await until(
    '/ready to answer 503 after SIGTERM',
    async () => (await fetch(`${origin}/ready`)).status === 503,
  )
  const ready = await fetch(`${origin}/ready`)
  assert.equal(ready.status, 503)
  assert.equal(((await ready.json()) as { shutting_down?: boolean }).shutting_down, true)
  // Still serving during the drain: the load balancer needs time to see the 503 and stop sending.
  // Kept alive during the drain period: a client straight to the instance keeps its connection until
  // the listener closes, and is never caught reconnecting at that moment (see the test below).
  const health = await fetch(`${origin}/health`)
  assert.equal(health.status, 200)
  assert.notEqual(health.headers.get('connection'), 'close')
  assert.equal(await service.exited, 0, service.stderr)
  // The last line says so (the primary's, with --workers).
  assert.equal(service.lines.at(-1)?.msg, 'stopped', JSON.stringify(service.lines.slice(-3)))
  for (const pid of pids) assert.equal(isRunning(pid), false, `process ${pid} still running`)
  await assert.rejects(fetch(`${origin}/health`), 'the port is released')
}

describe('SIGTERM: graceful drain', () => {
  test('node bin/wristband.js serve: /ready 503 at once, still serving, then exit 0', {
    timeout: START_BOUND_MS + EXIT_BOUND_MS,
  }, async () => {
    const started = await startService([process.execPath, BIN, 'serve'], {})
    dirs.push(started.dir)
    // A first start on an empty database: the migrations it applied, then one summary line.
    const lines = started.service.lines
    const migrations = lines.find((l) => String(l.msg).startsWith('applied migrations:'))
    assert.ok(migrations, JSON.stringify(lines.slice(0, 5)))
    assert.ok((migrations.migrations as string[]).includes('001-core'))
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }
    const summary = lines.find((l) => String(l.msg).startsWith('wristband ') && l.workers !== undefined)
    assert.deepEqual(summary && [summary.version, summary.workers, summary.database, summary.redis], [
      pkg.version,
      1,
      'sqlite',
      false,
    ])
    await assertGracefulStop(started, () => started.service.child.kill('SIGTERM'))
  })

  test('serve --workers 2: every worker drains, the primary exits 0 once all have', {
    timeout: START_BOUND_MS + EXIT_BOUND_MS,
    ...(redisUrl ? {} : { skip: 'TEST_REDIS_URL is not set: several workers need Redis' }),
  }, async () => {
    const started = await startService([process.execPath, BIN, 'serve', '--workers', '2'], {
      REDIS_URL: redisUrl!,
      REDIS_PREFIX: `wbtest:shutdown:${process.pid}:`,
    })
    dirs.push(started.dir)
    await until('both workers to listen', () => servingPids(started.service).length === 2)
    await assertGracefulStop(started, () => started.service.child.kill('SIGTERM'))
  })
})

/** What a client sending straight to the instance saw of one request. */
type Outcome = 'answered' | 'refused' | string

/**
 * One client of the operator test: requests one after the other on a keep-alive connection pool of
 * its own (undici, as fetch), until the instance is gone. A refused connection (the listener closed:
 * nothing was accepted, the client may retry elsewhere) is no failure; a reset, a 503 or an answer
 * cut short is.
 */
async function client(origin: string, stopped: () => boolean, outcomes: Outcome[], n: number): Promise<void> {
  const agent = new Agent({ keepAliveTimeout: 60_000 })
  try {
    for (let i = n; ; i++) {
      // A verify every fourth request, 20 ms apart: six clients stay well under the 600 verify calls a
      // minute that an address without a verify credential may make (a 429 would count as a failure).
      const verify = i % 4 === 0
      try {
        const res = await fetch(`${origin}${verify ? '/tokens/verify' : '/health'}`, {
          method: verify ? 'POST' : 'GET',
          ...(verify ? { headers: { 'content-type': 'application/json' }, body: '{"token":"x.y.z"}' } : {}),
          dispatcher: agent,
        } as RequestInit)
        await res.text()
        outcomes.push(res.status === 200 ? 'answered' : `status ${res.status}`)
      } catch (err) {
        const code = (err as { cause?: { code?: string } }).cause?.code
        if (code === 'ECONNREFUSED') {
          outcomes.push('refused')
          if (stopped()) return
        } else
          outcomes.push(`${(err as Error).message}: ${code ?? String((err as { cause?: unknown }).cause)}`)
      }
      await sleep(20)
    }
  } finally {
    await agent.close()
  }
}

describe('SIGTERM with clients straight to the instance (no load balancer)', () => {
  test('every request the instance accepted is answered; keep-alive connections end after their answer', {
    timeout: START_BOUND_MS + EXIT_BOUND_MS,
  }, async () => {
    const started = await startService([process.execPath, BIN, 'serve'], {
      SHUTDOWN_DRAIN_SECONDS: '2',
      LOG_LEVEL: 'warn',
    })
    dirs.push(started.dir)
    const origin = `http://127.0.0.1:${started.port}`
    const outcomes: Outcome[] = []
    let exited = false
    const clients = Array.from({ length: 6 }, (_, n) => client(origin, () => exited, outcomes, n))
    await until('requests to flow', () => outcomes.length >= 50)
    started.service.child.kill('SIGTERM')
    assert.equal(await started.service.exited, 0, started.service.stderr)
    exited = true
    await Promise.all(clients)
    const failures = outcomes.filter((o) => o !== 'answered' && o !== 'refused')
    const answered = outcomes.filter((o) => o === 'answered').length
    console.log(
      `drain straight to the instance: ${answered} answered, ${outcomes.length - answered - failures.length} refused after the listener closed, ${failures.length} failed`,
    )
    assert.deepEqual(failures, [])
  })
})

describe('npm start', () => {
  // A copy of what `npm start` needs, so its build writes a dist/ of its own and not the one under test.
  let copy: string
  before(() => {
    copy = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-npm-start-'))
    for (const f of ['package.json', 'tsconfig.json', 'tsconfig.build.json'])
      fs.copyFileSync(path.join(ROOT, f), path.join(copy, f))
    // packages/: the build also bundles the scanner's page (packages/scanner/build.mjs).
    for (const d of ['bin', 'src', 'packages'])
      fs.cpSync(path.join(ROOT, d), path.join(copy, d), {
        recursive: true,
        filter: (from) => !from.includes(`${path.sep}node_modules`),
      })
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'))
  })
  after(() => fs.rmSync(copy, { recursive: true, force: true }))

  test('SIGTERM to npm drains and stops the service: nothing keeps running, the port is free', {
    timeout: START_BOUND_MS + EXIT_BOUND_MS,
  }, async () => {
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
    const started = await startService([npm, 'start', '--silent'], {}, copy)
    dirs.push(started.dir)
    await assertGracefulStop(started, () => started.service.child.kill('SIGTERM'))
  })
})
