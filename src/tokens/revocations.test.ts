import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { Redis } from 'ioredis'
import pino from 'pino'
import {
  apiKeyOf,
  login,
  logout,
  revokedApiKey,
  STANDARD_SEED,
  startApp,
  type TestApp,
  verifyToken,
  withTwoInstances,
} from '../../test/helpers/app.js'
import { backends, eachBackend, type ProvisionedBackend, useDatabase } from '../../test/helpers/backends.js'
import { TestClock } from '../../test/helpers/clock.js'
import {
  freePort,
  killProcess,
  redisServerInstalled,
  startRedisServer,
} from '../../test/helpers/processes.js'
import { moreRedisErrors } from '../../test/helpers/scrape.js'
import { until } from '../../test/helpers/until.js'
import { memoryRevocations, type RevocationStore, redisRevocations } from './revocations.js'

const HOUR = 3_600_000

async function loggedOut(t: TestApp): Promise<string> {
  const pair = await login(t, 'ev1@example.com')
  const res = await logout(t, pair.access_token, pair.refresh_token)
  assert.equal(res.statusCode, 200)
  return pair.refresh_token
}

/** Deletes every key of a prefix: what a Redis restart without persistence leaves behind. */
async function wipeRedis(url: string, prefix: string): Promise<number> {
  const client = new Redis(url, { lazyConnect: true })
  await client.connect()
  let cursor = '0'
  let n = 0
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    if (keys.length) n += await client.del(...keys)
    cursor = next
  } while (cursor !== '0')
  client.disconnect()
  return n
}

eachBackend(backends, 'revocation store contract', (backend) => {
  // One storage the restart tests below start instances on in turn (startApp's own would die with each).
  let p: ProvisionedBackend
  before(async () => {
    p = await backend.provision()
  })
  after(async () => {
    await p?.dispose()
  })

  describe('the store itself', () => {
    const database = useDatabase(backend)
    let store: RevocationStore
    let redis: Redis | undefined
    const clock = new TestClock()
    before(async () => {
      const env = database.env()
      const deps = { db: database.handle().db, clock }
      if (env.REDIS_URL) {
        redis = new Redis(env.REDIS_URL, { lazyConnect: true })
        await redis.connect()
        store = redisRevocations(deps, redis, env.REDIS_PREFIX!, pino({ level: 'silent' }))
      } else {
        store = memoryRevocations(deps)
      }
      await store.start()
    })
    after(async () => {
      store?.stop()
      redis?.disconnect()
    })

    test('revoke, then isRevoked is true for that jti only', async () => {
      const jti = randomBytes(18).toString('base64url')
      assert.equal(await store.isRevoked(jti), false)
      await store.revoke([{ jti, expiresAt: clock.now() + HOUR }])
      assert.equal(await store.isRevoked(jti), true)
      assert.equal(await store.isRevoked(`${jti}x`), false)
      await store.revoke([{ jti, expiresAt: clock.now() + HOUR }])
      assert.equal(await store.isRevoked(jti), true, 'revoking twice is harmless')
    })

    test('a revocation is written to the database, the durable record', async () => {
      const jti = randomBytes(18).toString('base64url')
      await store.revoke([{ jti, expiresAt: clock.now() + HOUR }])
      const row = await database
        .handle()
        .db.selectFrom('revoked_tokens')
        .selectAll()
        .where('jti', '=', jti)
        .executeTakeFirst()
      assert.ok(row)
    })
  })

  test('revocations survive a restart of the service', async () => {
    const first = await startApp(backend, {}, p)
    let revoked: string
    try {
      await first.seed(STANDARD_SEED)
      revoked = await loggedOut(first)
      assert.equal((await verifyToken(first, revoked)).valid, false)
    } finally {
      await first.close()
    }
    const second = await startApp(backend, {}, p)
    try {
      assert.equal((await verifyToken(second, revoked)).valid, false)
      const live = await login(second, 'ev1@example.com')
      assert.equal((await verifyToken(second, live.refresh_token)).valid, true)
    } finally {
      await second.close()
    }
  })

  test('revocations survive a restart of Redis (its keys gone)', redisOnly(backend.name), async () => {
    const t = await startApp(backend, {}, p)
    try {
      await t.seed(STANDARD_SEED)
      const revoked = await loggedOut(t)
      const live = (await login(t, 'ev1@example.com')).refresh_token
      assert.ok((await wipeRedis(t.config.REDIS_URL!, t.config.REDIS_PREFIX)) > 0, 'keys were there')
      assert.equal((await verifyToken(t, revoked)).valid, false)
      assert.equal((await verifyToken(t, live)).valid, true)
    } finally {
      await t.close()
    }
  })

  /**
   * Creates an API key on `a`, sees `b` accept it (and keep it in its cache of keys), then revokes it on
   * `a`: the revocation-list entry `b` must learn of. (Refresh tokens are refused through their rows,
   * on every instance at once, and never are on the list.)
   */
  async function revokedOnOne(a: TestApp, b: TestApp): Promise<string> {
    await a.seed(STANDARD_SEED)
    const { key, revoke } = await apiKeyOf(a)
    assert.equal((await verifyToken(b, key)).valid, true)
    await revoke()
    return key
  }

  // Each instance answers from its own memory, fed by the Redis feed (or, without Redis, by
  // the database cursor), so the other instance learns the revocation a moment later: polled.
  test('two instances sharing storage: revoked on one, refused by the other (polled)', async () => {
    await withTwoInstances(
      backend,
      {},
      async (a, b) => {
        const key = await revokedOnOne(a, b)
        await until('the other instance refuses the key', async () => !(await verifyToken(b, key)).valid)
        // A refresh token signed out on one instance is refused by the other at once (its row).
        const pair = await login(a, 'ev1@example.com')
        assert.equal((await logout(a, pair.access_token, pair.refresh_token)).statusCode, 200)
        const refreshOnB = await b.request({
          method: 'POST',
          url: '/auth/refresh',
          payload: { refresh_token: pair.refresh_token },
        })
        assert.equal(refreshOnB.statusCode, 401)
      },
      p,
    )
  })

  test(
    'with Redis the feed carries it: the other instance never needs the database poll',
    redisOnly(backend.name),
    async () => {
      // A poll interval beyond the wait of `until`: only the pub/sub feed can deliver in time.
      const slow = { REVOCATION_POLL_MS: '60000' }
      await withTwoInstances(
        backend,
        slow,
        async (a, b) => {
          const key = await revokedOnOne(a, b)
          await until('the feed reaches the other instance', async () => !(await verifyToken(b, key)).valid)
        },
        p,
      )
    },
  )
})

/** Sharing between instances and Redis restarts only mean something where Redis holds the state. */
function redisOnly(name: string) {
  return name.includes('redis') ? {} : { skip: `${name}: in-process state is per instance, no Redis` }
}

describe(
  'revocations across a real Redis outage and restart',
  !process.env.TEST_REDIS_URL
    ? { skip: 'TEST_REDIS_URL is not set: Redis suite SKIPPED' }
    : !redisServerInstalled
      ? { skip: 'redis-server is not installed: Redis restart suite SKIPPED' }
      : {},
  () => {
    test('revoked tokens stay refused while Redis is down and after it restarts empty; one warning per outage', async () => {
      const port = await freePort()
      let redis = await startRedisServer(port)
      const t = await startApp(backends[0]!, { REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_PREFIX: 'wbr:' })
      const spy = new Redis(port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => 50 })
      spy.on('error', () => {})
      const warnings = () => t.logs.filter((l) => l.includes('redis unreachable')).length
      try {
        await t.seed(STANDARD_SEED)
        const revoked = await loggedOut(t)
        const revokedKey = await revokedApiKey(t)
        const live = (await login(t, 'ev1@example.com')).refresh_token

        await killProcess(redis)
        await until('the outage warning', () => warnings() === 1)
        assert.equal((await verifyToken(t, revoked)).valid, false, 'down: the database answers')
        assert.equal((await verifyToken(t, revokedKey)).valid, false, 'down: the revoked key too')
        assert.equal((await verifyToken(t, live)).valid, true)
        for (let i = 0; i < 12; i++)
          assert.notEqual(
            (
              await t.request({
                method: 'POST',
                url: '/auth/login',
                payload: {},
                headers: { 'x-forwarded-for': '192.0.2.5' },
              })
            ).statusCode,
            429,
            'limits fail open',
          )
        await moreRedisErrors(t, 3) // several failed reconnection attempts
        assert.equal(warnings(), 1, 'one warning per outage, not per attempt or request')

        redis = await startRedisServer(port)
        await until('the recovery note', () => t.logs.some((l) => l.includes('redis reachable again')))
        await spy.connect()
        await until('the reload into Redis', async () => (await spy.exists('wbr:rv:complete')) === 1)
        assert.ok(
          (await spy.keys('wbr:rv:api_key:*')).length >= 1,
          'the revocation was copied back into Redis',
        )
        assert.equal((await verifyToken(t, revoked)).valid, false, 'restarted empty: still refused')
        assert.equal((await verifyToken(t, revokedKey)).valid, false, 'restarted empty: the key too')
        assert.equal((await verifyToken(t, live)).valid, true)

        await killProcess(redis)
        await until('a warning for the second outage', () => warnings() === 2)
      } finally {
        spy.disconnect()
        await t.close()
        await killProcess(redis)
      }
    })

    test('a subscription refused while the connection stands is tried again until the feed is followed; warned once', async () => {
      const port = await freePort()
      const redis = await startRedisServer(port)
      const admin = new Redis(port, '127.0.0.1', { lazyConnect: true })
      const count = (t: TestApp, text: string) => t.logs.filter((l) => l.includes(text)).length
      try {
        await admin.connect()
        // The default user may use no channel: SUBSCRIBE is refused (NOPERM), the connection stays up.
        await admin.call('ACL', 'SETUSER', 'default', 'resetchannels')
        const t = await startApp(backends[0]!, {
          REDIS_URL: `redis://127.0.0.1:${port}`,
          REDIS_PREFIX: 'wbn:',
        })
        try {
          await until('the refusal', () => count(t, 'could not follow the revocation feed') > 0)
          assert.equal(count(t, 'revocation feed followed'), 0)
          await admin.call('ACL', 'SETUSER', 'default', 'allchannels')
          await until('the feed followed', () => count(t, 'revocation feed followed') === 1)
          assert.equal(count(t, 'could not follow the revocation feed'), 1, 'one warning')
          assert.equal(count(t, 'redis unreachable'), 0, 'no reconnect was needed')
        } finally {
          await t.close()
        }
      } finally {
        admin.disconnect()
        await killProcess(redis)
      }
    })

    test('while the feed is down, a revocation made by another instance is refused at once (per-request look-up)', async () => {
      const port = await freePort()
      let redis = await startRedisServer(port)
      // The database poll is out of the picture: only the feed or the per-request look-up can tell b.
      const env = {
        REDIS_URL: `redis://127.0.0.1:${port}`,
        REDIS_PREFIX: 'wbf:',
        REVOCATION_POLL_MS: '60000',
      }
      try {
        await withTwoInstances(backends[0]!, env, async (a, b) => {
          const feedLost = () => b.logs.some((l) => l.includes('revocation feed lost'))
          await until('b follows the feed', () => b.logs.some((l) => l.includes('revocation feed followed')))
          await a.seed(STANDARD_SEED)
          const { key, revoke } = await apiKeyOf(a)
          assert.equal((await verifyToken(b, key)).valid, true)
          await killProcess(redis)
          await until('b notices the feed is gone', feedLost)
          await revoke()
          assert.equal((await verifyToken(b, key)).valid, false, 'b asked the database')
          redis = await startRedisServer(port)
          await until(
            'b follows the feed again',
            () => b.logs.filter((l) => l.includes('revocation feed followed')).length === 2,
          )
          assert.equal(
            (await verifyToken(b, key)).valid,
            false,
            'caught up from the database before trusting memory',
          )
        })
      } finally {
        await killProcess(redis)
      }
    })
  },
)
