import assert from 'node:assert/strict'
import type { ChildProcess } from 'node:child_process'
import net from 'node:net'
import { after, before, test } from 'node:test'
import { Redis } from 'ioredis'
import {
  login,
  logout,
  nextAddress,
  revokedApiKey,
  STANDARD_SEED,
  startApp,
  type TestApp,
  verifyToken,
} from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import {
  freePort,
  killProcess,
  redisServerInstalled,
  startRedisServer,
} from '../../test/helpers/processes.js'
import { assertPerMinuteLimit } from '../../test/helpers/rate-limit.js'
import { until } from '../../test/helpers/until.js'
import { LEVEL_RANK } from '../platform/logging.js'

const PREFIX = 'wbo:'
const LOGIN_LIMIT = 10

async function refresh(t: TestApp, token: string) {
  return t.request({ method: 'POST', url: '/auth/refresh', payload: { refresh_token: token } })
}

/** Warning-level (or worse) log lines about Redis: an outage must be reported once, not per request. */
function redisWarnings(t: TestApp): string[] {
  return t.logs.filter((l) => {
    const line = JSON.parse(l) as { level: string; msg: string }
    return (LEVEL_RANK[line.level] ?? 0) >= LEVEL_RANK.warn! && /redis/i.test(line.msg)
  })
}

const loginLimit = () => ({ method: 'POST' as const, url: '/auth/login', payload: {} })

eachBackend(
  httpBackends,
  'Redis killed mid-run (own redis-server)',
  (backend) => {
    let p: ProvisionedBackend
    let port: number
    let redis: ChildProcess
    let t: TestApp
    before(async () => {
      p = await backend.provision()
      port = await freePort()
      redis = await startRedisServer(port)
      t = await startApp(
        backend,
        { REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_PREFIX: PREFIX, RATE_LIMIT_SYNC_MS: '100' },
        p,
      )
      await t.seed(STANDARD_SEED)
    })
    after(async () => {
      await t?.close()
      if (redis) await killProcess(redis)
      await p?.dispose()
    })

    test('limits fail open with one warning; verification and revocations keep answering from the database; the revocations are reloaded into the empty Redis', async () => {
      // Before: the limits are counted in this Redis.
      await assertPerMinuteLimit(t, LOGIN_LIMIT, loginLimit)
      const spy = new Redis(port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => 50 })
      spy.on('error', () => {})
      await spy.connect()
      // Counts are added to Redis every RATE_LIMIT_SYNC_MS: polled.
      await until(
        'the rate-limit counters reach Redis',
        async () => (await spy.keys(`${PREFIX}rl:*`)).length > 0,
      )
      spy.disconnect()

      const revokedBefore = await login(t, 'ev1@example.com')
      const loggedOut = await logout(t, revokedBefore.access_token, revokedBefore.refresh_token)
      assert.equal(loggedOut.statusCode, 200, loggedOut.body)
      const revokedKey = await revokedApiKey(t)
      const toRevokeDuring = await login(t, 'ev1@example.com')
      const live = await login(t, 'ev1@example.com')
      assert.equal((await verifyToken(t, revokedBefore.refresh_token)).valid, false)
      assert.equal((await verifyToken(t, toRevokeDuring.refresh_token)).valid, true)
      assert.deepEqual(redisWarnings(t), [], 'no warning while Redis is up')

      await killProcess(redis)
      await until('the outage warning', async () => redisWarnings(t).length === 1)

      // Verification keeps answering, right in both directions.
      assert.equal((await verifyToken(t, live.access_token)).valid, true)
      assert.equal((await verifyToken(t, live.refresh_token)).valid, true)
      assert.equal(
        (await verifyToken(t, `${live.access_token.slice(0, -2)}xx`)).valid,
        false,
        'a forged signature',
      )
      assert.equal((await verifyToken(t, 'not-a-token')).valid, false)
      assert.equal(
        (await verifyToken(t, revokedBefore.refresh_token)).valid,
        false,
        'revoked before the outage',
      )

      // A revocation during the outage goes to the database and holds.
      const during = await logout(t, toRevokeDuring.access_token, toRevokeDuring.refresh_token)
      assert.equal(during.statusCode, 200, during.body)
      assert.equal(
        (await verifyToken(t, toRevokeDuring.refresh_token)).valid,
        false,
        'revoked during the outage',
      )
      assert.equal((await refresh(t, toRevokeDuring.refresh_token)).statusCode, 401)
      assert.equal((await refresh(t, revokedBefore.refresh_token)).statusCode, 401)

      // Limits fail open: one address goes well past the login limit.
      const address = nextAddress()
      for (let i = 0; i < LOGIN_LIMIT * 2; i++) {
        const res = await t.request({ ...loginLimit(), headers: { 'x-forwarded-for': address } })
        assert.equal(res.statusCode, 422, `request ${i + 1}: ${res.statusCode} ${res.body}`)
      }
      // The client keeps reconnecting in the background: several failed attempts, still one line.
      // A listener on the dead Redis port counts the attempts (and drops each one), so the check
      // runs after attempts were seen rather than after some time.
      let attempts = 0
      const drop = net.createServer((socket) => {
        attempts++
        socket.destroy()
      })
      await new Promise<void>((resolve) => drop.listen(port, '127.0.0.1', resolve))
      try {
        await until('three reconnect attempts', () => attempts >= 3, 30_000)
      } finally {
        await new Promise<void>((resolve) => drop.close(() => resolve()))
      }
      assert.equal(redisWarnings(t).length, 1, redisWarnings(t).join('\n'))

      const rotated = await refresh(t, live.refresh_token)
      assert.equal(rotated.statusCode, 200, `refresh works during the outage: ${rotated.body}`)
      const current = rotated.json() as { access_token: string; refresh_token: string }
      assert.equal(
        (await verifyToken(t, live.refresh_token)).valid,
        false,
        'the rotated-away token is revoked',
      )

      // Redis comes back empty (no persistence): the revocations are copied back from the database.
      redis = await startRedisServer(port)
      await until('the recovery note', async () => t.logs.some((l) => l.includes('redis reachable again')))
      const check = new Redis(port, '127.0.0.1', { lazyConnect: true })
      const stillRefused = async (when: string) => {
        assert.equal((await verifyToken(t, current.access_token)).valid, true, when)
        assert.equal((await verifyToken(t, current.refresh_token)).valid, true, when)
        for (const [what, token] of [
          ['revoked before the outage', revokedBefore.refresh_token],
          ['revoked during the outage', toRevokeDuring.refresh_token],
          // Not presented to /auth/refresh: a rotated token coming back is theft and ends the family.
          ['rotated during the outage', live.refresh_token],
        ] as const)
          assert.equal((await verifyToken(t, token)).valid, false, `${when}: ${what}`)
        for (const token of [revokedBefore.refresh_token, toRevokeDuring.refresh_token])
          assert.equal((await refresh(t, token)).statusCode, 401, when)
      }
      try {
        await check.connect()
        await until('the reload into Redis', async () => (await check.exists(`${PREFIX}rv:complete`)) === 1)
        // The list holds what is revoked (the API key); refresh tokens are refused through their rows.
        assert.ok(
          (await check.keys(`${PREFIX}rv:api_key:*`)).length >= 1,
          'revocations copied back into Redis',
        )
        assert.equal((await verifyToken(t, revokedKey)).valid, false, 'the revoked key stays refused')
        await stillRefused('reloaded into Redis')
        await check.flushall()
        await stillRefused('Redis flushed again: the database answers')
      } finally {
        check.disconnect()
      }

      // And the limits are counted again.
      await assertPerMinuteLimit(t, LOGIN_LIMIT, loginLimit)
      assert.equal(redisWarnings(t).length, 1, 'one warning for the whole outage')
    })
  },
  redisServerInstalled ? undefined : 'redis-server is not installed: SKIPPED',
)
