import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { TEST_SECRET } from '../test/helpers/app.js'
import { freePort, LoggedProcess } from '../test/helpers/processes.js'
import { systemClock } from './platform/clock.js'
import { openDatabase } from './platform/db/database.js'
import { applySeed } from './seed/seed.js'

const CLI = fileURLToPath(new URL('./cli.ts', import.meta.url))
const TSX = import.meta.resolve('tsx')

describe('wristband serve', () => {
  let dir: string
  let port: number
  let service: LoggedProcess
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-serve-'))
    const h = await openDatabase(`sqlite:${path.join(dir, 'wristband.db')}`)
    await h.migrate()
    await applySeed(h.db, systemClock, {
      administrators: [
        { email: 'root@example.com', password: 's3cret-pass', role: 'superadmin', event_ids: [] },
      ],
    })
    await h.close()
    port = await freePort()
    const child = spawn(process.execPath, ['--import', TSX, CLI, 'serve'], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? '',
        DATA_DIR: dir,
        HOST: '127.0.0.1',
        PORT: String(port),
        JWT_SECRET: TEST_SECRET,
        LOG_LEVEL: 'info',
        SHUTDOWN_DRAIN_SECONDS: '1',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    service = new LoggedProcess(child)
    await service.waitFor((l) => String(l.msg).includes('Server listening'))
  })
  after(() => {
    if (service.child.exitCode === null) service.child.kill('SIGKILL')
    fs.rmSync(dir, { recursive: true, force: true })
  })

  test('answers /health once listening', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/health`)
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { status: 'ok' })
  })

  test('SIGTERM drains a request in flight: it completes with 200 and the process exits 0', async () => {
    const body = JSON.stringify({ email: 'root@example.com', password: 's3cret-pass' })
    const half = Math.floor(body.length / 2)
    const response = new Promise<{ status: number; body: string; connection?: string }>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/auth/login',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          let text = ''
          res.on('data', (d) => {
            text += d
          })
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body: text, connection: res.headers.connection }),
          )
        },
      )
      req.on('error', reject)
      req.write(body.slice(0, half))
      // The rest of the body goes out only once the service has begun shutting down (below).
      service
        .waitFor((l) => l.msg === 'shutting down: draining in-flight requests')
        .then(() => req.end(body.slice(half)))
    })
    await service.waitFor(
      (l) => l.msg === 'incoming request' && (l.req as { url?: string } | undefined)?.url === '/auth/login',
    )
    service.child.kill('SIGTERM')
    await service.waitFor((l) => l.msg === 'shutting down: draining in-flight requests')
    // New work is turned away while the old request drains: the connection is refused once the
    // listener is closed, or (in the moment before) answered 503.
    const fresh = await new Promise<string>((resolve) => {
      const socket = net.connect(port, '127.0.0.1')
      let data = ''
      socket.on('connect', () => socket.end('GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n'))
      socket.on('data', (d) => {
        data += d
      })
      socket.on('close', () => resolve(data.split('\r\n')[0] ?? ''))
      socket.on('error', (e: NodeJS.ErrnoException) => resolve(String(e.code)))
    })
    assert.ok(['ECONNREFUSED', 'ECONNRESET', '', 'HTTP/1.1 503 Service Unavailable'].includes(fresh), fresh)

    const res = await response
    assert.equal(res.status, 200, res.body)
    assert.ok(JSON.parse(res.body).access_token)
    // The drained connection is closed after its answer rather than kept alive until its timeout.
    assert.equal(res.connection, 'close')
    assert.equal(await service.exited, 0)
  })
})
