import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { login, STANDARD_SEED, startApp, type TestApp } from '../../test/helpers/app.js'
import { httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { type DatabaseHandle, openDatabase } from './db/database.js'

/** A TCP relay in front of PostgreSQL that can be cut and restored, to play an unreachable database. */
class Relay {
  private server?: net.Server
  private readonly sockets = new Set<net.Socket>()
  port = 0
  constructor(private readonly target: { host: string; port: number }) {}

  async open(): Promise<void> {
    this.server = net.createServer((client) => {
      const upstream = net.connect(this.target.port, this.target.host)
      for (const s of [client, upstream]) {
        this.sockets.add(s)
        s.on('close', () => this.sockets.delete(s))
        s.on('error', () => {})
      }
      client.pipe(upstream).pipe(client)
    })
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve))
    this.port = (this.server.address() as net.AddressInfo).port
  }

  async cut(): Promise<void> {
    const closed = new Promise((resolve) => this.server?.close(resolve))
    for (const s of this.sockets) s.destroy()
    await closed
  }
}

const pgBackend = httpBackends.find((b) => b.name.startsWith('postgres'))!

describe('database unreachable', pgBackend.skip ? { skip: pgBackend.skip } : {}, () => {
  let p: ProvisionedBackend
  let relay: Relay
  let t: TestApp
  let direct: DatabaseHandle
  before(async () => {
    p = await pgBackend.provision()
    const url = new URL(p.env.DATABASE_URL!)
    relay = new Relay({ host: url.hostname, port: Number(url.port || 5432) })
    await relay.open()
    url.hostname = '127.0.0.1'
    url.port = String(relay.port)
    t = await startApp(pgBackend, { DATABASE_URL: url.toString() }, p)
    await t.seed(STANDARD_SEED)
    direct = await openDatabase(p.env.DATABASE_URL!, { schema: p.env.DATABASE_SCHEMA! })
  })
  after(async () => {
    await t?.close()
    await direct?.close()
    await relay?.cut()
    await p?.dispose()
  })

  test('requests that need the database answer 503 and change nothing; service resumes after', async () => {
    const pair = await login(t, 'ev1@example.com')
    const stored = async () =>
      direct.db
        .selectFrom('refresh_tokens')
        .select(['jti', 'rotated_at', 'revoked_at'])
        .orderBy('jti')
        .execute()
    const before = await stored()

    await relay.cut()
    for (const [method, url, payload, token] of [
      ['POST', '/auth/login', { email: 'ev1@example.com', password: 's3cret-pass' }, undefined],
      ['POST', '/auth/refresh', { refresh_token: pair.refresh_token }, undefined],
      ['POST', '/auth/logout', { refresh_token: pair.refresh_token }, pair.access_token],
      ['GET', '/admin/me', undefined, pair.access_token],
    ] as const) {
      const res = await t.request({
        method,
        url,
        ...(payload ? { payload } : {}),
        ...(token ? { token } : {}),
      })
      assert.equal(res.statusCode, 503, `${method} ${url}: ${res.body}`)
      assert.deepEqual(Object.keys(res.json()), ['detail'])
    }
    assert.equal(
      (await t.request({ method: 'GET', url: '/health' })).statusCode,
      200,
      'liveness needs no database',
    )
    assert.deepEqual(await stored(), before, 'nothing was written')

    await relay.open()
    const res = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: pair.refresh_token },
    })
    assert.equal(res.statusCode, 200, 'the refresh token refused with 503 is still good')
  })
})
