// Redis behind Sentinel, failed over under sign-in and verify load: three sentinels, a master and a
// replica, all private processes on free ports (the shared Redis is never touched). The master is
// handed over on purpose (SENTINEL FAILOVER), then frozen (SIGSTOP: it keeps its clients' connections
// open, as a hung machine or a partition does), then killed. Each time nothing acknowledged is lost,
// verification and readiness answer throughout, and the rate limits and revocations are back on the
// new master once the sentinels have moved.
import assert from 'node:assert/strict'
import type { ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { Redis } from 'ioredis'
import {
  apiKeyOf,
  logout,
  nextAddress,
  STANDARD_SEED,
  startApp,
  type TestApp,
  verifyToken,
} from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import {
  freePort,
  killProcess,
  redisSentinelInstalled,
  redisServerInstalled,
  startRedisSentinel,
  startRedisServer,
} from '../../test/helpers/processes.js'
import { until, waitFor } from '../../test/helpers/until.js'

const MASTER = 'wbmaster'
const DATA_PASSWORD = 'data-pass-for-the-test'
const SENTINEL_PASSWORD = 'sentinel-pass-for-the-test'
const PREFIX = 'wbs:'
const LOGIN_LIMIT = 10

interface TokenPair {
  access_token: string
  refresh_token: string
}

/** A client of one of our sentinels. */
function sentinelClient(port: number): Redis {
  const c = new Redis(port, '127.0.0.1', { password: SENTINEL_PASSWORD, lazyConnect: true })
  c.on('error', () => {})
  return c
}

/** A client of one of our data servers. */
function dataClient(port: number): Redis {
  const c = new Redis(port, '127.0.0.1', { password: DATA_PASSWORD, lazyConnect: true })
  c.on('error', () => {})
  return c
}

/** Runs `fn` with a fresh client, disconnected after. */
async function withClient<T>(c: Redis, fn: (c: Redis) => Promise<T>): Promise<T> {
  try {
    await c.connect()
    return await fn(c)
  } finally {
    c.disconnect()
  }
}

/** The master's port as one sentinel reports it (undefined while it cannot say). */
async function masterPortSeenBy(sentinelPort: number): Promise<number | undefined> {
  try {
    return await withClient(sentinelClient(sentinelPort), async (c) => {
      const addr = (await c.call('SENTINEL', 'get-master-addr-by-name', MASTER)) as string[] | null
      return addr ? Number(addr[1]) : undefined
    })
  } catch {
    return undefined
  }
}

/** SENTINEL replicas/sentinels as lists of field maps. */
async function sentinelList(sentinelPort: number, what: 'replicas' | 'sentinels') {
  return withClient(sentinelClient(sentinelPort), async (c) => {
    const rows = (await c.call('SENTINEL', what, MASTER)) as string[][]
    return rows.map((r) => Object.fromEntries(r.flatMap((v, i) => (i % 2 ? [] : [[v, r[i + 1]]]))))
  })
}

/**
 * Sign-in and verify load on a fleet of two, until stopped: each round signs in on one instance and
 * verifies the new access token on the other; every other round signs the pair out there (its refresh
 * tokens end: their rows refuse them), every fourth creates an API key here and revokes it there (the
 * revocation list, which Redis carries between instances); and one instance's readiness is asked.
 * Every answer is kept, and what was acknowledged.
 */
function startLoad(fleet: [TestApp, TestApp]) {
  const answers: { what: string; status: number; body: string }[] = []
  const live: TokenPair[] = []
  const signedOut: TokenPair[] = []
  const revokedKeys: string[] = []
  const readiness = new Set<string>()
  let stopped = false
  let rounds = 0
  const note = (what: string, res: LightMyRequestResponse) => {
    answers.push({ what, status: res.statusCode, body: res.body })
    return res.statusCode === 200
  }
  const loop = async (k: number) => {
    for (let i = 0; !stopped; i++) {
      const here = fleet[(i + k) % 2]!
      const there = fleet[(i + k + 1) % 2]!
      const signedIn = await here.request({
        method: 'POST',
        url: '/auth/login',
        payload: { email: 'ev1@example.com', password: 's3cret-pass', role: 'admin' },
      })
      if (note('login', signedIn)) {
        const pair = signedIn.json() as TokenPair
        const verified = await there.request({
          method: 'POST',
          url: '/tokens/verify',
          payload: { token: pair.access_token },
        })
        if (note('verify', verified) && verified.json().valid !== true)
          answers.push({ what: 'verify of a fresh token', status: 0, body: verified.body })
        if (i % 4 === 1) {
          const created = await here.request({
            method: 'POST',
            url: '/tokens/api-key',
            token: pair.access_token,
            payload: { event_id: 1, name: `load-${nextAddress()}`, scopes: ['api:read'] },
          })
          if (note('create key', created)) {
            const { id, api_key } = created.json() as { id: number; api_key: string }
            const revoked = await there.request({
              method: 'DELETE',
              url: `/tokens/api-key/${id}`,
              token: pair.access_token,
            })
            if (note('revoke key', revoked)) revokedKeys.push(api_key)
          }
        }
        // Only an acknowledged sign-out is promised; one refused (503) may be retried by its client.
        if (i % 2 === 0 && note('logout', await logout(there, pair.access_token, pair.refresh_token)))
          signedOut.push(pair)
        else live.push(pair)
      }
      const ready = await here.request({ method: 'GET', url: '/ready' })
      note('ready', ready)
      readiness.add(`${ready.statusCode} ${ready.json().status}`)
      rounds++
    }
  }
  const running = Promise.all([loop(0), loop(1)])
  return {
    answers,
    live,
    signedOut,
    revokedKeys,
    readiness,
    rounds: () => rounds,
    async stop() {
      stopped = true
      await running
    },
  }
}

/** Sends `limit` sign-in attempts from one address, alternating between the instances, then one more. */
async function assertFleetWideLimit(fleet: [TestApp, TestApp]): Promise<void> {
  const address = nextAddress()
  for (const t of fleet) t.clock.freeze()
  try {
    for (let i = 0; i <= LOGIN_LIMIT; i++) {
      const res = await fleet[i % 2]!.request({
        method: 'POST',
        url: '/auth/login',
        payload: {},
        headers: { 'x-forwarded-for': address },
      })
      if (i < LOGIN_LIMIT) assert.notEqual(res.statusCode, 429, `attempt ${i + 1} was limited`)
      // Counted in process, each instance would allow LOGIN_LIMIT on its own.
      else assert.equal(res.statusCode, 429, 'the fleet-wide limit holds: counted in the shared Redis')
    }
  } finally {
    for (const t of fleet) t.clock.thaw()
  }
}

const followed = (t: TestApp) => t.logs.filter((l) => l.includes('revocation feed followed')).length

eachBackend(
  httpBackends,
  'Redis through Sentinel, failed over under load (own sentinels, master and replica)',
  (backend) => {
    let dir: string
    const ports = { first: 0, second: 0, sentinels: [] as number[] }
    const servers = new Map<number, ChildProcess>()
    const sentinels: ChildProcess[] = []
    let p: ProvisionedBackend
    let fleet: [TestApp, TestApp]

    /** Waits until every sentinel names `port` as the master. */
    const masterMovedTo = (port: number) =>
      until(`every sentinel to name 127.0.0.1:${port} the master`, async () => {
        const seen = await Promise.all(ports.sentinels.map(masterPortSeenBy))
        return seen.every((s) => s === port)
      })

    /** Waits until the replica is in sync and every sentinel knows it and the two other sentinels. */
    const settled = (replicaPort: number) =>
      until('the sentinels to know the replica and each other', async () => {
        // The sentinels close every client of a server they reconfigure: asked again.
        return knowsReplica(replicaPort).catch(() => false)
      })

    const knowsReplica = async (replicaPort: number) => {
      const sync = await withClient(dataClient(replicaPort), (c) => c.info('replication'))
      if (!/master_link_status:up/.test(sync)) return false
      for (const port of ports.sentinels) {
        const replicas = await sentinelList(port, 'replicas')
        const others = await sentinelList(port, 'sentinels')
        const good = replicas.some(
          (r) => Number(r.port) === replicaPort && !/s_down|o_down|disconnected/.test(String(r.flags)),
        )
        if (!good || others.length !== ports.sentinels.length - 1) return false
      }
      return true
    }

    before(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-sentinel-'))
      ports.first = await freePort()
      ports.second = await freePort()
      const auth = ['--requirepass', DATA_PASSWORD, '--masterauth', DATA_PASSWORD]
      servers.set(ports.first, await startRedisServer(ports.first, auth, DATA_PASSWORD))
      servers.set(
        ports.second,
        await startRedisServer(
          ports.second,
          [...auth, '--replicaof', '127.0.0.1', String(ports.first)],
          DATA_PASSWORD,
        ),
      )
      for (let i = 0; i < 3; i++) {
        const port = await freePort()
        ports.sentinels.push(port)
        sentinels.push(
          await startRedisSentinel(
            port,
            dir,
            [
              `sentinel sentinel-pass ${SENTINEL_PASSWORD}`,
              `sentinel monitor ${MASTER} 127.0.0.1 ${ports.first} 2`,
              `sentinel auth-pass ${MASTER} ${DATA_PASSWORD}`,
              `sentinel down-after-milliseconds ${MASTER} 1000`,
              `sentinel failover-timeout ${MASTER} 3000`,
            ],
            SENTINEL_PASSWORD,
          ),
        )
      }
      await settled(ports.second)
      p = await backend.provision()
      const env = {
        // The backend's own Redis is replaced by ours ('' is unset).
        REDIS_URL: '',
        REDIS_SENTINELS: ports.sentinels.map((port) => `127.0.0.1:${port}`).join(','),
        REDIS_SENTINEL_MASTER: MASTER,
        REDIS_PASSWORD: DATA_PASSWORD,
        REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
        REDIS_PREFIX: PREFIX,
      }
      const a = await startApp(backend, env, p)
      const b = await startApp(backend, env, p)
      fleet = [a, b]
      await a.seed(STANDARD_SEED)
      for (const t of fleet) await until('the revocation feed', () => followed(t) > 0)
    })
    after(async () => {
      for (const t of fleet ?? []) await t.close()
      for (const child of [...servers.values(), ...sentinels]) await killProcess(child)
      await p?.dispose()
      if (dir) fs.rmSync(dir, { recursive: true, force: true })
    })

    /**
     * Fails the master over from `from` to `to` with `failOver` while the load runs, then checks that no
     * acknowledged write was lost, nothing answered 5xx, readiness stayed 200, and the rate limits and
     * revocations work on the new master.
     */
    async function failOverUnderLoad(from: number, to: number, failOver: () => Promise<void>) {
      const feedsBefore = fleet.map(followed)
      const load = startLoad(fleet)
      try {
        await until('some load before the failover', () => load.rounds() >= 10)
        await failOver()
        await masterMovedTo(to)
        // The sentinels have moved; the instances follow on their next connection.
        await until('both instances back on the new master, ready and not degraded', async () => {
          for (const t of fleet) {
            const ready = await t.request({ method: 'GET', url: '/ready' })
            if (ready.json().checks.redis.status !== 'up') return false
          }
          return true
        })
        const roundsThen = load.rounds()
        await until('more load on the new master', () => load.rounds() >= roundsThen + 10)
      } finally {
        await load.stop()
      }

      const bad = load.answers.filter((a) => a.status >= 500 || a.status === 0)
      assert.deepEqual(bad, [], 'no 5xx (and no fresh token refused) while failing over')
      for (const seen of load.readiness)
        assert.ok(/^200 (ready|degraded)$/.test(seen), `readiness answered ${seen}`)
      assert.ok(
        load.signedOut.length > 0 && load.revokedKeys.length > 0 && load.live.length > 0,
        'the load signed in and out and revoked keys',
      )

      // The instances resubscribed to the revocation feed on the new master.
      for (const [i, t] of fleet.entries())
        await until('the revocation feed followed again', () => followed(t) > feedsBefore[i]!)

      // Every acknowledged revocation and sign-out holds on both instances; every acknowledged
      // sign-in refreshes.
      for (const t of fleet) {
        for (const key of load.revokedKeys)
          assert.equal((await verifyToken(t, key)).valid, false, 'a revoked key is refused')
        for (const pair of load.signedOut) {
          assert.equal((await verifyToken(t, pair.refresh_token)).valid, false, 'signed out: refused')
          const refreshed = await t.request({
            method: 'POST',
            url: '/auth/refresh',
            payload: { refresh_token: pair.refresh_token },
          })
          assert.equal(refreshed.statusCode, 401, refreshed.body)
        }
      }
      for (const [i, pair] of load.live.entries()) {
        const t = fleet[i % 2]!
        assert.equal((await verifyToken(t, pair.access_token)).valid, true, 'signed in: valid')
        const refreshed = await t.request({
          method: 'POST',
          url: '/auth/refresh',
          payload: { refresh_token: pair.refresh_token },
        })
        assert.equal(refreshed.statusCode, 200, `an acknowledged sign-in refreshes: ${refreshed.body}`)
      }

      // Rate limits count in the new master again, across the fleet.
      await assertFleetWideLimit(fleet)
      // A revocation made now reaches the other instance and lands in the new master.
      const { key, revoke } = await apiKeyOf(fleet[0])
      assert.equal((await verifyToken(fleet[1], key)).valid, true)
      await revoke(fleet[0])
      assert.equal((await verifyToken(fleet[1], key)).valid, false, 'revoked on the other instance')
      await withClient(dataClient(to), async (c) => {
        assert.equal(await c.call('ROLE').then((r) => (r as string[])[0]), 'master')
        assert.ok((await c.keys(`${PREFIX}rl:*`)).length > 0, 'rate-limit counters in the new master')
        const [id] = await waitFor(async () => {
          const keys = await c.keys(`${PREFIX}rv:api_key:*`)
          return keys.length > 0 ? keys : undefined
        })
        assert.ok(id, 'the revocation in the new master')
      })
      assert.notEqual(from, to)
    }

    test('SENTINEL FAILOVER (the old master stays up as a replica): nothing acknowledged lost, no 5xx, readiness 200, limits and revocations back', async () => {
      await failOverUnderLoad(ports.first, ports.second, async () => {
        await withClient(sentinelClient(ports.sentinels[0]!), (c) => c.call('SENTINEL', 'failover', MASTER))
      })
      // The old master is now the new one's replica, ready for the next failover.
      await settled(ports.first)
    })

    test('the master frozen (SIGSTOP: its connections stay open): the instances leave it when the sentinels announce the new master; nothing acknowledged lost, no 5xx, readiness 200, limits and revocations back', async () => {
      const frozen = servers.get(ports.second)!
      await failOverUnderLoad(ports.second, ports.first, async () => {
        frozen.kill('SIGSTOP')
      })
      // Back, it is turned into the new master's replica by the sentinels.
      frozen.kill('SIGCONT')
      await settled(ports.second)
    })

    test('the master killed: the sentinels agree and promote the replica; nothing acknowledged lost, no 5xx, readiness 200, limits and revocations back', async () => {
      await failOverUnderLoad(ports.first, ports.second, async () => {
        await killProcess(servers.get(ports.first)!)
        servers.delete(ports.first)
      })
    })
  },
  redisServerInstalled && redisSentinelInstalled
    ? undefined
    : 'redis-server and redis-sentinel are not both installed (apt-get install redis-server redis-sentinel): SKIPPED',
)
