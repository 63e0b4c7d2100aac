// The service's Redis client under Sentinel, against private redis-server and redis-sentinel
// processes: the ways a client could be left without Redis for good.
import assert from 'node:assert/strict'
import type { ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { Redis } from 'ioredis'
import pino from 'pino'
import {
  freePort,
  killProcess,
  redisSentinelInstalled,
  redisServerInstalled,
  startRedisSentinel,
  startRedisServer,
} from '../../test/helpers/processes.js'
import { until } from '../../test/helpers/until.js'
import { createRedis } from './redis.js'

const MASTER = 'wbunit'
const log = pino({ level: 'silent' })
const local = (port: number) => ({ host: '127.0.0.1', port })

describe(
  'the Redis client under Sentinel (own master and sentinels)',
  redisServerInstalled && redisSentinelInstalled
    ? {}
    : {
        skip: 'redis-server and redis-sentinel are not both installed (apt-get install redis-server redis-sentinel): SKIPPED',
      },
  () => {
    let dir: string
    let master: ChildProcess
    const sentinels: { port: number; child: ChildProcess }[] = []
    const clients: Redis[] = []
    /** A client of the service on `sentinelPorts`, disconnected after the suite. */
    const client = (sentinelPorts: number[]) => {
      const c = createRedis({ sentinels: sentinelPorts.map(local), master: MASTER }, log)
      c.on('error', () => {})
      clients.push(c)
      return c
    }

    before(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-sentinel-unit-'))
      const masterPort = await freePort()
      master = await startRedisServer(masterPort)
      for (let i = 0; i < 2; i++) {
        const port = await freePort()
        const child = await startRedisSentinel(port, dir, [
          `sentinel monitor ${MASTER} 127.0.0.1 ${masterPort} 1`,
        ])
        sentinels.push({ port, child })
      }
    })
    after(async () => {
      for (const c of clients) c.disconnect()
      for (const s of sentinels) {
        s.child.kill('SIGCONT')
        await killProcess(s.child)
      }
      if (master) await killProcess(master)
      if (dir) fs.rmSync(dir, { recursive: true, force: true })
    })

    test('a connection closed while the client asks the sentinels for the master (what the failover detector does on +switch-master) connects again; ioredis alone would end the client', async () => {
      // The first sentinel named does not answer, so the question is still open when the connection closes.
      const c = client([await freePort(), sentinels[0]!.port])
      let ended = false
      c.on('end', () => {
        ended = true
      })
      void c.connect().catch(() => {})
      assert.equal(c.status, 'connecting')
      c.disconnect(true)
      await until('ioredis ends the client', () => ended)
      await until('the client connected again', () => c.status === 'ready')
      assert.equal(await c.ping(), 'PONG')
      assert.equal(await c.call('ROLE').then((r) => (r as string[])[0]), 'master')
    })

    test('a sentinel that hangs (SIGSTOP: it accepts connections, answers nothing) is passed over for the next one', async () => {
      const frozen = sentinels[1]!
      frozen.child.kill('SIGSTOP')
      try {
        const c = client([frozen.port, sentinels[0]!.port])
        void c.connect().catch(() => {})
        await until('connected through the next sentinel', () => c.status === 'ready')
        assert.equal(await c.ping(), 'PONG')
      } finally {
        frozen.child.kill('SIGCONT')
      }
    })
  },
)
