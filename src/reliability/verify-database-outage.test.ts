import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { login, nextAddress, STANDARD_SEED, startApp, type TestApp } from '../../test/helpers/app.js'
import { httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { relayedDatabase, type TcpRelay } from '../../test/helpers/tcp-relay.js'
import { until } from '../../test/helpers/until.js'

/**
 * Verification through a database outage: a fleet of two instances on PostgreSQL (through a relay the
 * test cuts, never the shared server) and Redis, under a steady load of POST /tokens/verify and POST
 * /oauth2/introspect through real sockets. The database goes away: every answer stays right (good
 * tokens valid, tokens revoked before the outage refused), none is a 5xx, /ready says 503 and
 * /ready/verify 200; a revocation asked for meanwhile is refused with 503 (never lost quietly), a verify
 * credential nobody used before cannot be checked (503), and after the cache window of credentials
 * and API keys has passed the ones in use go on working. The database comes back: everything recovers.
 */

const pg = httpBackends.find((b) => b.name.startsWith('postgres'))!
const skip =
  pg.skip ??
  (process.env.TEST_REDIS_URL
    ? undefined
    : 'TEST_REDIS_URL is not set: the fleet of this test needs Redis, database outage suite SKIPPED')

interface Case {
  token: string
  valid: boolean
  what: string
}

/** Requests in a loop against both instances, each answer checked against what it must be. */
class VerifyLoad {
  total = 0
  readonly wrong: string[] = []
  private running = false
  private loops: Promise<void>[] = []
  constructor(
    private readonly origins: string[],
    private readonly cases: Case[],
    private readonly credential: string,
  ) {}

  start(concurrency = 6): void {
    this.running = true
    for (let n = 0; n < concurrency; n++) this.loops.push(this.loop(n))
  }

  async stop(): Promise<void> {
    this.running = false
    await Promise.all(this.loops)
  }

  private async loop(n: number): Promise<void> {
    let i = n
    while (this.running) {
      i++
      const c = this.cases[i % this.cases.length]!
      const origin = this.origins[i % this.origins.length]!
      // Verify with and without the credential, and introspection (which always has it).
      const kind = i % 3
      try {
        const res =
          kind === 2
            ? await fetch(`${origin}/oauth2/introspect`, {
                method: 'POST',
                headers: {
                  'content-type': 'application/x-www-form-urlencoded',
                  authorization: `Bearer ${this.credential}`,
                },
                body: new URLSearchParams({ token: c.token }),
              })
            : await fetch(`${origin}/tokens/verify`, {
                method: 'POST',
                headers: { 'content-type': 'application/json', 'x-forwarded-for': nextAddress() },
                body: JSON.stringify(
                  kind === 0 ? { token: c.token } : { token: c.token, api_key: this.credential },
                ),
              })
        const body = (await res.json()) as { valid?: boolean; active?: boolean }
        const said = kind === 2 ? body.active : body.valid
        if (res.status !== 200 || said !== c.valid)
          this.wrong.push(
            `${origin} ${kind === 2 ? 'introspect' : 'verify'} ${c.what}: ${res.status} ${JSON.stringify(body)}`,
          )
      } catch (err) {
        this.wrong.push(`${origin} ${c.what}: ${(err as Error).message}`)
      }
      this.total++
    }
  }
}

describe('verify through a database outage, a fleet of two', skip ? { skip } : {}, () => {
  let p: ProvisionedBackend
  let relay: TcpRelay
  let a: TestApp
  let b: TestApp
  const origins: string[] = []
  before(async () => {
    p = await pg.provision()
    const relayed = await relayedDatabase(p.env.DATABASE_URL!)
    relay = relayed.relay
    a = await startApp(pg, { DATABASE_URL: relayed.url }, p)
    b = await startApp(pg, { DATABASE_URL: relayed.url }, p)
    await a.seed(STANDARD_SEED)
    for (const t of [a, b]) {
      await t.app.listen({ host: '127.0.0.1', port: 0 })
      origins.push(`http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`)
    }
  })
  after(async () => {
    await relay?.open().catch(() => {})
    await a?.close()
    await b?.close()
    await relay?.cut()
    await p?.dispose()
  })

  const apiKey = async (scopes: string[]) => {
    const admin = (await login(a, 'ev1@example.com')).access_token
    const res = await a.request({
      method: 'POST',
      url: '/tokens/api-key',
      token: admin,
      payload: { event_id: 1, name: `outage ${nextAddress()}`, scopes },
    })
    assert.equal(res.statusCode, 200, res.body)
    return res.json() as { id: number; api_key: string }
  }
  const status = async (origin: string, path: string) => (await fetch(`${origin}${path}`)).status

  test('zero wrong answers and zero 5xx on verify and introspection; revocations refused with 503; recovery', {
    timeout: 300_000,
  }, async () => {
    // What the load checks: good tokens of every kind, and tokens revoked before the outage, on
    // either instance (through RFC 7009, logout, API-key revocation).
    const admin = await login(a, 'ev1@example.com')
    const operator = await login(b, 'op@example.com', 'operator')
    const revokedAccess = (await login(a, 'root@example.com')).access_token
    const revokedOnB = (await login(b, 'ev1@example.com')).access_token
    const loggedOut = await login(a, 'nm@example.com', 'network_manager')
    const partnerKey = await apiKey(['api:read'])
    const revokedKey = await apiKey(['api:read'])
    const credential = (await apiKey(['tokens:verify'])).api_key
    const unused = (await apiKey(['tokens:verify'])).api_key
    const revoke = (on: TestApp, token: string) =>
      on.request({ method: 'POST', url: '/oauth2/revoke', payload: { token } })
    assert.equal((await revoke(a, revokedAccess)).statusCode, 200)
    assert.equal((await revoke(b, revokedOnB)).statusCode, 200)
    assert.equal((await revoke(b, revokedKey.api_key)).statusCode, 200)
    const out = await a.request({
      method: 'POST',
      url: '/auth/logout',
      token: loggedOut.access_token,
      payload: { refresh_token: loggedOut.refresh_token },
    })
    assert.equal(out.statusCode, 200, out.body)
    const cases: Case[] = [
      { token: admin.access_token, valid: true, what: 'access token' },
      { token: operator.access_token, valid: true, what: 'operator access token' },
      { token: partnerKey.api_key, valid: true, what: 'API key' },
      { token: revokedAccess, valid: false, what: 'access token revoked on a' },
      { token: revokedOnB, valid: false, what: 'access token revoked on b' },
      { token: revokedKey.api_key, valid: false, what: 'revoked API key' },
      { token: 'garbage', valid: false, what: 'garbage' },
    ]
    // Both instances have learned every revocation before the database goes.
    for (const origin of origins)
      for (const c of cases)
        await until(`${origin} to answer ${c.what} right`, async () => {
          const res = await fetch(`${origin}/tokens/verify`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ token: c.token, api_key: credential }),
          })
          return res.status === 200 && ((await res.json()) as { valid: boolean }).valid === c.valid
        })

    const load = new VerifyLoad(origins, cases, credential)
    load.start()
    try {
      await until('the load to run', async () => load.total >= 200)
      await relay.cut()
      for (const origin of origins) {
        await until(`${origin}/ready to say 503`, async () => (await status(origin, '/ready')) === 503)
        assert.equal(await status(origin, '/ready/verify'), 200, `${origin}/ready/verify`)
      }
      const atCut = load.total
      await until('requests answered during the outage', async () => load.total >= atCut + 300)

      // Past the 60 s in which a cached credential or API key is answered without the database: those
      // in use go on working from memory (checked against the revocation list on every use).
      for (const t of [a, b]) t.clock.advance(61_000)
      const afterWindow = load.total
      await until('requests answered past the cache window', async () => load.total >= afterWindow + 300)

      // Revocations that cannot be stored: 503, and the tokens stay good (nothing was half done).
      const keep = await login(a, 'ev1@example.com').catch(() => undefined)
      assert.equal(keep, undefined, 'sign-in needs the database')
      for (const [on, token] of [
        [a, admin.access_token],
        [b, operator.refresh_token],
        [a, partnerKey.api_key],
      ] as const) {
        const res = await revoke(on, token)
        assert.equal(res.statusCode, 503, res.body)
      }
      const logoutDuringOutage = await b.request({
        method: 'POST',
        url: '/auth/logout',
        token: operator.access_token,
        payload: { refresh_token: operator.refresh_token },
      })
      assert.equal(logoutDuringOutage.statusCode, 503, logoutDuringOutage.body)
      const keyRevoke = await a.request({
        method: 'DELETE',
        url: `/tokens/api-key/${partnerKey.id}`,
        token: admin.access_token,
      })
      assert.equal(keyRevoke.statusCode, 503, keyRevoke.body)
      // A verify credential no instance has seen cannot be checked: 503 to that caller alone.
      const unknown = await fetch(`${origins[0]}/tokens/verify`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: admin.access_token, api_key: unused }),
      })
      assert.equal(unknown.status, 503)
      const duringOutage = load.total - atCut
      assert.ok(duringOutage >= 600, `${duringOutage} answers during the outage`)
      console.log(`verify through a database outage: ${duringOutage} answers while the database was cut`)
    } finally {
      await load.stop()
    }
    console.log(`verify through a database outage: ${load.total} answers, ${load.wrong.length} wrong or 5xx`)
    assert.deepEqual(load.wrong.slice(0, 20), [], `${load.wrong.length} wrong answers of ${load.total}`)

    // The database returns: readiness, sign-in, revocation (seen by the other instance) all recover.
    await relay.open()
    for (const origin of origins)
      await until(`${origin}/ready to say 200`, async () => (await status(origin, '/ready')) === 200)
    const fresh = await login(b, 'ev1@example.com')
    assert.equal((await revoke(a, admin.access_token)).statusCode, 200)
    await until('b to refuse the token revoked on a after the outage', async () => {
      const res = await b.request({
        method: 'POST',
        url: '/tokens/verify',
        payload: { token: admin.access_token },
      })
      return res.json().valid === false
    })
    const verified = await fetch(`${origins[1]}/tokens/verify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: fresh.access_token, api_key: unused }),
    })
    assert.equal(verified.status, 200, 'the unknown credential is checked once the database is back')
    assert.equal(((await verified.json()) as { valid: boolean }).valid, true)
    // The refresh token whose revocation was refused during the outage is still good.
    const refreshed = await b.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: operator.refresh_token },
    })
    assert.equal(refreshed.statusCode, 200, refreshed.body)
  })
})
