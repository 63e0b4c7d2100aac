import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { TEST_SECRET } from '../../test/helpers/app.js'
import { freePort, LoggedProcess } from '../../test/helpers/processes.js'
import { availableCpus, cgroupCpuQuota } from './cpu-quota.js'

const BIN = fileURLToPath(new URL('../../bin/wristband.js', import.meta.url))
const redisUrl = process.env.TEST_REDIS_URL

describe('serve --workers N when workers die at start', () => {
  let dir: string
  let blocker: net.Server
  let port: number
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-workers-'))
    port = await freePort()
    blocker = net.createServer()
    await new Promise<void>((resolve) => blocker.listen(port, '127.0.0.1', resolve))
  })
  after(() => {
    blocker.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  test('with the port taken, the primary backs off, gives up after a few deaths and exits non-zero with one line', {
    timeout: 120_000,
    ...(redisUrl ? {} : { skip: 'TEST_REDIS_URL is not set: several workers need Redis' }),
  }, async () => {
    const child = spawn(process.execPath, [BIN, 'serve', '--workers', '2'], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? '',
        DATA_DIR: dir,
        HOST: '127.0.0.1',
        PORT: String(port),
        JWT_SECRET: TEST_SECRET,
        REDIS_URL: redisUrl!,
        REDIS_PREFIX: `wbtest:workers:${process.pid}:`,
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const service = new LoggedProcess(child)
    const code = await service.exited
    assert.notEqual(code, 0)
    const lines = service.stderr.trim().split('\n')
    // The replacements in between are log records; the verdict is one plain line, no stack trace.
    const plain = lines.filter((l) => !l.startsWith('{'))
    assert.equal(plain.length, 1, service.stderr)
    assert.match(
      plain[0]!,
      /^wristband serve: 3 workers in a row died at start \(last: .*EADDRINUSE.*\); giving up$/,
    )
    const replaced = lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { pause_ms: number })
    assert.equal(replaced.length, 2, service.stderr)
    assert.ok(
      replaced.every((r) => r.pause_ms > 0),
      'a worker dying at once is replaced after a pause',
    )
    assert.ok(replaced[1]!.pause_ms > replaced[0]!.pause_ms, 'the pause grows')
  })
})

describe('serve --workers N: what the primary loads', () => {
  // The primary applies the migrations and forks; loading the app (every feature) as well cost it more
  // than the rest of its start, before any worker began.
  test('the primary never loads the app: its workers build it', {
    timeout: 120_000,
    ...(redisUrl ? {} : { skip: 'TEST_REDIS_URL is not set: several workers need Redis' }),
  }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-primary-'))
    const loaded = path.join(dir, 'loaded-by-primary.txt')
    const hook = path.join(dir, 'record-loads.mjs')
    // Records every module the primary process loads, written when it exits; workers record nothing.
    fs.writeFileSync(
      hook,
      `import cluster from 'node:cluster'
import fs from 'node:fs'
import { registerHooks } from 'node:module'
if (cluster.isPrimary) {
  const urls = []
  registerHooks({ load(url, context, next) { urls.push(url); return next(url, context) } })
  process.on('exit', () => fs.writeFileSync(${JSON.stringify(loaded)}, urls.join('\\n')))
}
`,
    )
    try {
      const child = spawn(process.execPath, ['--import', hook, BIN, 'serve', '--workers', '2'], {
        cwd: dir,
        env: {
          PATH: process.env.PATH ?? '',
          DATA_DIR: dir,
          HOST: '127.0.0.1',
          PORT: String(await freePort()),
          JWT_SECRET: TEST_SECRET,
          REDIS_URL: redisUrl!,
          REDIS_PREFIX: `wbtest:primary:${process.pid}:`,
          SHUTDOWN_DRAIN_SECONDS: '0',
          LOG_LEVEL: 'info',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      const service = new LoggedProcess(child)
      let serving = 0
      await service.waitFor(
        (l) => typeof l.msg === 'string' && l.msg.startsWith('wristband is serving') && ++serving === 2,
      )
      child.kill('SIGTERM')
      assert.equal(await service.exited, 0, service.stderr)
      const urls = fs.readFileSync(loaded, 'utf8').split('\n')
      assert.ok(
        urls.some((u) => u.endsWith('/src/platform/db/database.js')),
        'the primary opened the database (the hook saw its modules)',
      )
      assert.deepEqual(
        urls.filter((u) => /\/src\/(app|cli\/context)\.js$/.test(u)),
        [],
        "neither the app nor a command's context",
      )
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('default worker count and the cgroup CPU quota', () => {
  const files =
    (map: Record<string, string>) =>
    (file: string): string => {
      const content = map[file]
      if (content === undefined) throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' })
      return content
    }

  test('cgroup v2: cpu.max of the process cgroup, or of the mounted root', () => {
    assert.equal(
      cgroupCpuQuota(
        files({
          '/proc/self/cgroup': '0::/kubepods/pod1\n',
          '/sys/fs/cgroup/kubepods/pod1/cpu.max': '200000 100000\n',
        }),
      ),
      2,
    )
    assert.equal(
      cgroupCpuQuota(files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/cpu.max': '150000 100000' })),
      1.5,
    )
    assert.equal(
      cgroupCpuQuota(files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/cpu.max': 'max 100000' })),
      undefined,
    )
  })

  test('cgroup v1: cpu.cfs_quota_us over cpu.cfs_period_us; -1 is no limit', () => {
    const v1 = (quota: string) =>
      files({
        '/proc/self/cgroup': '4:cpu,cpuacct:/docker/abc\n',
        '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': quota,
        '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000',
      })
    assert.equal(cgroupCpuQuota(v1('300000\n')), 3)
    assert.equal(cgroupCpuQuota(v1('-1\n')), undefined)
    assert.equal(cgroupCpuQuota(files({})), undefined)
  })

  test('the quota caps the worker count below the host CPUs, never below one', () => {
    assert.equal(availableCpus(undefined), os.availableParallelism())
    assert.equal(availableCpus(0.5), 1)
    assert.equal(availableCpus(1.9), 1)
    assert.equal(availableCpus(1000), os.availableParallelism())
  })
})
