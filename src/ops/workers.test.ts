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
