import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { TEST_SECRET } from '../../test/helpers/app.js'
import {
  freePort,
  killProcess,
  redisServerInstalled,
  startRedisServer,
} from '../../test/helpers/processes.js'
import { sample } from '../../test/helpers/scrape.js'
import { until } from '../../test/helpers/until.js'

const BIN = fileURLToPath(new URL('../../bin/wristband.js', import.meta.url))
const METRICS_TOKEN = 'scrape-token-0123456789abcdef'
const skip =
  process.env.TEST_REDIS_URL || redisServerInstalled
    ? false
    : 'needs TEST_REDIS_URL or redis-server: more than one worker needs Redis'

describe('GET /metrics under serve --workers 2', { skip }, () => {
  let dir: string
  let port: number
  let service: ChildProcess
  let redis: ChildProcess | undefined
  let listening = 0
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-cluster-metrics-'))
    let redisUrl = process.env.TEST_REDIS_URL
    if (!redisUrl) {
      const redisPort = await freePort()
      redis = await startRedisServer(redisPort)
      redisUrl = `redis://127.0.0.1:${redisPort}`
    }
    port = await freePort()
    service = spawn(process.execPath, [BIN, 'serve', '--workers', '2'], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? '',
        DATA_DIR: dir,
        PORT: String(port),
        JWT_SECRET: TEST_SECRET,
        REDIS_URL: redisUrl,
        REDIS_PREFIX: `wb-cluster-metrics-${process.pid}:`,
        METRICS_TOKEN,
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    service.stdout!.on('data', (d) => {
      listening += String(d).split('Server listening').length - 1
    })
    await until('both workers to listen', () => listening >= 2, 60_000)
  })
  after(async () => {
    await killProcess(service)
    if (redis) await killProcess(redis)
    fs.rmSync(dir, { recursive: true, force: true })
  })

  test('one scrape counts the requests of every worker', async () => {
    const scrape = async () => {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`, {
        headers: { authorization: `Bearer ${METRICS_TOKEN}`, connection: 'close' },
      })
      assert.equal(res.status, 200)
      return res.text()
    }
    const health = { method: 'GET', route: '/health', status_code: '200' }
    const count = 'wristband_http_request_duration_seconds_count'
    const before = sample(await scrape(), count, health)
    // A new connection each: the primary hands connections to the workers in turn.
    const n = 10
    for (let i = 0; i < n; i++) {
      const res = await fetch(`http://127.0.0.1:${port}/health`, { headers: { connection: 'close' } })
      assert.equal(res.status, 200)
    }
    for (let i = 0; i < 4; i++) {
      // Whichever worker answers the scrape, it reports the sum over both.
      assert.equal(sample(await scrape(), count, health) - before, n)
    }
    const text = await scrape()
    // The outbox depth is read from the one shared table: the largest reading, not the sum.
    assert.match(text, /^wristband_webhook_outbox_depth 0$/m)
    // The start time is the earliest worker's, not a sum of times (nor missing, prom-client's default).
    const started = sample(text, 'process_start_time_seconds')
    assert.ok(
      started > Date.now() / 1000 - 3600 && started <= Date.now() / 1000,
      `process_start_time_seconds ${started}`,
    )
    // One build_info series: the release, the same in every worker.
    assert.equal(sample(text, 'wristband_build_info'), 1)
  })
})
