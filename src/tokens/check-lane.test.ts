import assert from 'node:assert/strict'
import { once } from 'node:events'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import {
  apiKeyOf,
  login,
  STANDARD_SEED,
  startApp,
  type TestApp,
  withTwoInstances,
} from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { comparable, lanePair, portOf, type Sent, send } from '../../test/helpers/lane.js'
import { relayedDatabase, type TcpRelay } from '../../test/helpers/tcp-relay.js'
import { until } from '../../test/helpers/until.js'
import { createApiKey } from '../api-keys/api-keys.store.js'
import { VERIFY_LIMITS } from './verify.routes.js'

/**
 * GET /tokens/check on the verify lane (check-lane.ts), over real sockets: the lane answers as the
 * route does (same statuses, headers and bodies with VERIFY_FAST_LANE on and off), a revocation on one
 * instance of a fleet reaches the other's checks, an instance that cannot decide answers 503, never
 * 200, and one that drains still decides.
 */

const checkOf = (token: string | undefined, more: Partial<Sent> = {}): Sent => ({
  name: more.name ?? 'check',
  method: 'GET',
  path: '/tokens/check',
  ...more,
  headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...more.headers },
})

/** A verify credential for a gateway (an API key with scope tokens:verify). */
const gatewayCredential = (t: TestApp) =>
  createApiKey(t.db.db, {
    event_id: 1,
    name: 'gateway',
    scopes: ['tokens:verify'],
    created_by: null,
    now: t.clock.now(),
  })

eachBackend(httpBackends, 'GET /tokens/check: the lane answers as Fastify does', (backend) => {
  let on: TestApp
  let portOn: number
  let portOff: number
  const started = lanePair(backend)
  before(async () => {
    ;({ on, portOn, portOff } = started())
    await on.seed(STANDARD_SEED)
  })

  test('the same requests get the same status, headers and body with VERIFY_FAST_LANE on and off', async () => {
    const pair = await login(on, 'ev1@example.com')
    const operator = (await login(on, 'op@example.com', 'operator')).access_token
    const credential = await gatewayCredential(on)
    const token = pair.access_token
    const requests: Sent[] = [
      checkOf(token, { name: 'good token' }),
      checkOf(token, { name: 'with a request id', headers: { 'x-request-id': 'gw-1' } }),
      checkOf(undefined, { name: 'no token' }),
      checkOf(undefined, { name: 'basic', headers: { authorization: 'Basic Zm9vOmJhcg==' } }),
      checkOf('not-a-token', { name: 'garbage' }),
      checkOf('a'.repeat(VERIFY_LIMITS.maxToken + 1), { name: 'too long' }),
      checkOf(pair.refresh_token, { name: 'refresh token' }),
      checkOf(pair.refresh_token, { name: 'refresh allowed', path: '/tokens/check?type=refresh' }),
      checkOf(token, { name: 'role met', path: '/tokens/check?role=admin,operator' }),
      checkOf(token, { name: 'role unmet', path: '/tokens/check?role=consumer' }),
      checkOf(token, { name: 'event unmet', path: '/tokens/check?event=2' }),
      checkOf(operator, { name: 'scope met', path: '/tokens/check?event=1&scope=ticket:scan' }),
      checkOf(operator, { name: 'scope unmet', path: '/tokens/check?event=1&scope=pos:refund' }),
      checkOf(token, { name: 'header met', headers: { 'wristband-require-role': 'admin' } }),
      checkOf(token, { name: 'header unmet', headers: { 'wristband-require-event': '2' } }),
      checkOf(token, {
        name: 'query and header',
        path: '/tokens/check?role=admin',
        headers: { 'wristband-require-role': 'operator' },
      }),
      checkOf(token, { name: 'unknown parameter', path: '/tokens/check?roles=admin' }),
      checkOf(undefined, { name: 'unknown parameter, no token', path: '/tokens/check?roles=admin' }),
      checkOf(token, { name: 'escaped comma', path: '/tokens/check?role=admin%2Coperator' }),
      checkOf(token, { name: 'repeated parameter', path: '/tokens/check?role=admin&role=admin' }),
      checkOf(token, { name: 'empty value', path: '/tokens/check?role=' }),
      checkOf(token, { name: 'bare name', path: '/tokens/check?role' }),
      checkOf(token, { name: 'empty query', path: '/tokens/check?' }),
      checkOf(token, { name: 'event not canonical', path: '/tokens/check?event=01' }),
      checkOf(token, { name: 'event 0', path: '/tokens/check?event=0' }),
      checkOf(token, { name: 'event header 1e0', headers: { 'wristband-require-event': '1e0' } }),
      checkOf(token, { name: 'unknown header', headers: { 'wristband-require-roles': 'admin' } }),
      checkOf(token, { name: 'proto parameter', path: '/tokens/check?__proto__=1' }),
      checkOf(token, { name: 'suffix', path: '/tokens/check/app/page?role=consumer' }),
      checkOf(token, { name: 'suffix, slash only', path: '/tokens/check/' }),
      checkOf(token, {
        name: 'suffix, header',
        path: '/tokens/check/a',
        headers: { 'wristband-require-role': 'consumer' },
      }),
      checkOf(token, { name: 'not the check', path: '/tokens/checked' }),
      checkOf(token, { name: 'HEAD', method: 'HEAD' }),
      checkOf('x', { name: 'HEAD refused', method: 'HEAD' }),
      checkOf(token, { name: 'OPTIONS', method: 'OPTIONS' }),
      checkOf(token, { name: 'PUT with a body', method: 'PUT', body: '{"token":' }),
      checkOf(token, {
        name: 'POST, text',
        method: 'POST',
        body: 'hi',
        headers: { 'content-type': 'text/plain' },
      }),
      checkOf(token, { name: 'DELETE', method: 'DELETE', path: '/tokens/check/x' }),
      checkOf(token, { name: 'TRACE is not a gateway’s', method: 'TRACE' }),
      checkOf(token, { name: 'with a verify credential', headers: { api_key: credential.plaintext } }),
      checkOf(token, { name: 'with a made-up credential', headers: { api_key: 'wb_madeup' } }),
    ]
    for (const req of requests) {
      const address = `192.0.2.${requests.indexOf(req) + 1}`
      const headers = { 'x-forwarded-for': address, ...req.headers }
      const a = await send(portOn, { ...req, headers })
      const b = await send(portOff, { ...req, headers })
      assert.deepEqual(comparable(a, req), comparable(b, req), req.name)
    }

    // The lane did answer: its answers carry the same headers in an order of their own.
    for (const req of [checkOf(token), checkOf('x'), checkOf(token, { path: '/tokens/check?event=2' })]) {
      const headers = { 'x-forwarded-for': '198.18.1.1', ...req.headers }
      const a = await send(portOn, { ...req, headers })
      const b = await send(portOff, { ...req, headers })
      assert.equal(a.status, b.status)
      assert.notDeepEqual(
        a.rawHeaders.filter((_, i) => i % 2 === 0),
        b.rawHeaders.filter((_, i) => i % 2 === 0),
      )
    }
  })

  test('a body the lane never reads is discarded: the next request on the connection is answered', async () => {
    const { access_token } = await login(on, 'ev1@example.com')
    const socket = net.connect(portOn, '127.0.0.1')
    await once(socket, 'connect')
    const body = 'x'.repeat(200_000)
    let text = ''
    socket.setEncoding('utf8')
    socket.on('data', (d: string) => {
      text += d
    })
    socket.write(
      `POST /tokens/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${access_token}\r\n` +
        `Content-Type: application/octet-stream\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
        'GET /tokens/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n\r\n',
    )
    await until('both answers', () => text.includes('invalid_token'))
    socket.destroy()
    assert.match(text, /^HTTP\/1\.1 200 OK\r\n[\s\S]*x-auth-role: admin[\s\S]*HTTP\/1\.1 401 Unauthorized/)
  })
})

eachBackend(httpBackends, 'GET /tokens/check: the lane counts as the route does', (backend) => {
  let on: TestApp
  let portOn: number
  let portOff: number
  const started = lanePair(
    backend,
    { verifyLimits: { ...VERIFY_LIMITS, anonymousPerMinute: 3 } },
    { VERIFY_CLIENT_RATE_LIMIT: '4' },
  )
  before(async () => {
    ;({ on, portOn, portOff } = started())
    await on.seed(STANDARD_SEED)
  })

  test('per address without a credential, per credential with one; over it, the same 429 on both', async () => {
    const { access_token } = await login(on, 'ev1@example.com')
    const credential = await gatewayCredential(on)
    const rounds: [Sent, number][] = [
      [checkOf(access_token, { headers: { 'x-forwarded-for': '198.18.0.1' } }), 3],
      [checkOf('junk', { headers: { 'x-forwarded-for': '198.18.0.2' } }), 3],
      [
        checkOf(access_token, {
          headers: { 'x-forwarded-for': '198.18.0.3', api_key: credential.plaintext },
        }),
        4,
      ],
    ]
    for (const [req, limit] of rounds) {
      for (let i = 0; i < limit + 2; i++) {
        const [a, b] = await Promise.all([send(portOn, req), send(portOff, req)])
        assert.deepEqual(comparable(a, req), comparable(b, req), `request ${i + 1}`)
        assert.equal(a.headers['x-ratelimit-limit'], String(limit))
        if (i >= limit) assert.equal(a.status, 429)
        else assert.notEqual(a.status, 429)
      }
    }
  })
})

eachBackend(httpBackends, 'GET /tokens/check on a fleet of two', (backend) => {
  test('a revocation on one instance reaches the other’s checks (the revocation promise)', async () => {
    await withTwoInstances(backend, {}, async (a, b) => {
      await a.seed(STANDARD_SEED)
      await b.app.listen({ host: '127.0.0.1', port: 0 })
      const port = portOf(b)
      const status = async (token: string, path = '/tokens/check') =>
        (await send(port, checkOf(token, { path, headers: { 'x-forwarded-for': '198.18.2.1' } }))).status

      const key = await apiKeyOf(a)
      const asKey = '/tokens/check?type=api_key'
      assert.equal(await status(key.key, asKey), 200)
      assert.equal(await status(key.key, asKey), 200, 'remembered by b')
      await key.revoke(a)
      await until('b refuses the key revoked on a', async () => (await status(key.key, asKey)) === 401)

      const pair = await login(a, 'ev1@example.com')
      const asRefresh = '/tokens/check?type=refresh'
      assert.equal(await status(pair.refresh_token, asRefresh), 200)
      const rotated = await a.request({
        method: 'POST',
        url: '/auth/refresh',
        payload: { refresh_token: pair.refresh_token },
      })
      assert.equal(rotated.statusCode, 200)
      await until(
        'b refuses the refresh token rotated on a',
        async () => (await status(pair.refresh_token, asRefresh)) === 401,
      )
      assert.equal(await status(rotated.json().access_token), 200, 'its successor passes')
    })
  })
})

eachBackend(httpBackends, 'GET /tokens/check while the instance drains', (backend) => {
  test('the instance still decides: Fastify answers (closing the connection), never a 503', async () => {
    const t = await startApp(backend)
    try {
      await t.seed(STANDARD_SEED)
      await t.app.listen({ host: '127.0.0.1', port: 0 })
      const { access_token } = await login(t, 'ev1@example.com')
      t.app.beginDrain()
      t.app.endKeepAlive()
      const ok = await send(portOf(t), checkOf(access_token))
      assert.equal(ok.status, 200)
      assert.equal(ok.headers.connection, 'close', 'answered by Fastify')
      assert.equal(ok.headers['x-auth-role'], 'admin')
      assert.equal((await send(portOf(t), checkOf('x'))).status, 401)
    } finally {
      await t.close()
    }
  })
})

const postgres = httpBackends.find((b) => b.name.startsWith('postgres'))!

describe(
  'GET /tokens/check when the instance cannot decide',
  postgres.skip ? { skip: postgres.skip } : {},
  () => {
    let p: ProvisionedBackend
    let relay: TcpRelay
    let t: TestApp
    before(async () => {
      p = await postgres.provision()
      const relayed = await relayedDatabase(p.env.DATABASE_URL!)
      relay = relayed.relay
      t = await startApp(postgres, { DATABASE_URL: relayed.url }, p)
      await t.seed(STANDARD_SEED)
      await t.app.listen({ host: '127.0.0.1', port: 0 })
    })
    after(async () => {
      await relay?.open()
      await t?.close()
      await relay?.cut()
      await p?.dispose()
    })

    test('a token whose state needs the unreachable database: 503 on the lane and the route; then it decides again', async () => {
      const port = portOf(t)
      const access = (await login(t, 'ev1@example.com')).access_token
      const { refresh_token } = await login(t, 'ev1@example.com')
      const { plaintext: key } = await createApiKey(t.db.db, {
        event_id: 1,
        name: 'unseen',
        scopes: ['api:read'],
        created_by: null,
        now: t.clock.now(),
      })
      const cases = [
        ['an API key not looked up yet', key, '/tokens/check?type=api_key'],
        ['a refresh token whose row was not read lately', refresh_token, '/tokens/check?type=refresh'],
      ] as const
      await relay.cut()
      for (const [what, token, path] of cases) {
        const byLane = await send(port, checkOf(token, { path }))
        assert.equal(byLane.status, 503, `${what}, lane: ${byLane.body}`)
        assert.deepEqual(Object.keys(JSON.parse(byLane.body)), ['detail'])
        assert.equal(byLane.headers['x-auth-role'], undefined)
        const byRoute = await t.request({ method: 'GET', url: path, token })
        assert.equal(byRoute.statusCode, 503, `${what}, route: ${byRoute.body}`)
      }
      // An access token's answer needs no database: the signature and the revocations in memory.
      assert.equal((await send(port, checkOf(access))).status, 200, 'answered from memory')
      await relay.open()
      for (const [what, token, path] of cases)
        await until(
          `${what} decided again`,
          async () => (await send(port, checkOf(token, { path }))).status === 200,
        )
    })
  },
)
