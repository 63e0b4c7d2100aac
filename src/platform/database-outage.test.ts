import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { login, STANDARD_SEED, startApp, type TestApp } from '../../test/helpers/app.js'
import { httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { relayedDatabase, type TcpRelay } from '../../test/helpers/tcp-relay.js'
import { type DatabaseHandle, openDatabase } from './db/database.js'

const pgBackend = httpBackends.find((b) => b.name.startsWith('postgres'))!

describe('database unreachable', pgBackend.skip ? { skip: pgBackend.skip } : {}, () => {
  let p: ProvisionedBackend
  let relay: TcpRelay
  let t: TestApp
  let direct: DatabaseHandle
  before(async () => {
    p = await pgBackend.provision()
    const relayed = await relayedDatabase(p.env.DATABASE_URL!)
    relay = relayed.relay
    t = await startApp(pgBackend, { DATABASE_URL: relayed.url }, p)
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
    for (const url of ['/live', '/health'])
      assert.equal(
        (await t.request({ method: 'GET', url })).statusCode,
        200,
        `${url}: liveness needs no database`,
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
