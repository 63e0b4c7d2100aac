import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import {
  forEachBackend,
  PRODUCTION_ENV,
  STANDARD_SEED,
  startApp,
  type TestApp,
} from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

/**
 * The client address behind every per-address limit and every audit record. By default only a proxy on
 * this host or a private network (loopback, link-local, unique-local and RFC 1918 peers) may name the
 * client in X-Forwarded-For; a client that reaches the service directly cannot choose its own address.
 * A forwarded value that is not an IP address, or an overly long header, is ignored for the socket
 * address. `app.inject()` connects from 127.0.0.1 unless `remoteAddress` says otherwise.
 */
const LOGIN_LIMIT = 10
let peerCounter = 0
/** A public peer address (TEST-NET-3) used by one test only, so limits don't leak between tests. */
const nextPeer = () => `203.0.113.${++peerCounter}`

function send(t: TestApp, opts: InjectOptions): Promise<LightMyRequestResponse> {
  // t.request would add an X-Forwarded-For of its own; these tests name the header themselves.
  return t.app.inject(opts)
}

/** A cheap /auth/login request (422 before any password work) that counts against its limit. */
const cheapLogin = (remoteAddress: string, forwardedFor?: string): InjectOptions => ({
  method: 'POST',
  url: '/auth/login',
  payload: {},
  remoteAddress,
  headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
})

/** A failed login, which writes an audit record carrying the client address. */
const failedLogin = (remoteAddress: string, email: string, forwardedFor?: string): InjectOptions => ({
  method: 'POST',
  url: '/auth/login',
  payload: { email, password: 'wrong-password', role: 'admin' },
  remoteAddress,
  headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
})

async function auditIps(t: TestApp, actor: string): Promise<(string | null)[]> {
  const rows = await t.db.db.selectFrom('audit_log').select('ip').where('actor', '=', actor).execute()
  return rows.map((r) => r.ip)
}

forEachBackend(httpBackends, 'client address: TRUST_PROXY default', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
  })

  test('a direct client cannot escape the per-address login limit by rotating X-Forwarded-For', async () => {
    const peer = nextPeer()
    for (let i = 0; i < LOGIN_LIMIT; i++)
      assert.equal((await send(t, cheapLogin(peer, `198.51.100.${i + 1}`))).statusCode, 422)
    const res = await send(t, cheapLogin(peer, '198.51.100.200'))
    assert.equal(res.statusCode, 429, res.body)
    // Another direct client is its own address.
    assert.equal((await send(t, cheapLogin(nextPeer(), '198.51.100.200'))).statusCode, 422)
  })

  test('a direct client cannot forge the address of its audit records', async () => {
    const peer = nextPeer()
    const email = 'forger@example.com'
    assert.equal((await send(t, failedLogin(peer, email, '192.0.2.66'))).statusCode, 401)
    assert.deepEqual(await auditIps(t, `admin:${email}`), [peer])
  })

  test('a proxy on loopback or a private network still names the client', async () => {
    for (const [proxy, email] of [
      ['127.0.0.1', 'via-loopback@example.com'],
      ['10.20.30.40', 'via-private@example.com'],
      ['fd00::5', 'via-unique-local@example.com'],
    ] as const) {
      assert.equal((await send(t, failedLogin(proxy, email, '192.0.2.77'))).statusCode, 401)
      assert.deepEqual(await auditIps(t, `admin:${email}`), ['192.0.2.77'], proxy)
    }
  })

  test('a forwarded value that is not an IP address is ignored: the socket address is used', async () => {
    for (const [value, email] of [
      ['not-an-address', 'garbage@example.com'],
      ['192.0.2.1, <script>', 'mixed@example.com'],
      ['192.0.2.1:8080', 'with-port@example.com'],
      ['0x7f.1', 'hex@example.com'],
    ] as const) {
      assert.equal((await send(t, failedLogin('127.0.0.1', email, value))).statusCode, 401)
      assert.deepEqual(await auditIps(t, `admin:${email}`), ['127.0.0.1'], value)
    }
  })

  test('an overly long header is ignored, and no audit record keeps any of it', async () => {
    const long = `${'9'.repeat(12 * 1024)}`
    const email = 'long-header@example.com'
    assert.equal((await send(t, failedLogin('127.0.0.1', email, long))).statusCode, 401)
    assert.deepEqual(await auditIps(t, `admin:${email}`), ['127.0.0.1'])
    // A long chain of valid addresses is no better: the header is ignored whole.
    const chain = Array.from({ length: 200 }, (_, i) => `192.0.2.${i % 250}`).join(', ')
    const chainEmail = 'long-chain@example.com'
    assert.equal((await send(t, failedLogin('127.0.0.1', chainEmail, chain))).statusCode, 401)
    assert.deepEqual(await auditIps(t, `admin:${chainEmail}`), ['127.0.0.1'])
    const rows = await t.db.db.selectFrom('audit_log').select(['ip', 'detail', 'actor']).execute()
    for (const r of rows) assert.ok(!JSON.stringify(r).includes('9'.repeat(64)), JSON.stringify(r))
  })

  test('long X-Forwarded-For values are not rate-limit keys: they count against the socket address', async () => {
    const peer = nextPeer()
    for (let i = 0; i < LOGIN_LIMIT; i++)
      assert.equal((await send(t, cheapLogin(peer, `${'1'.repeat(4096)}${i}`))).statusCode, 422)
    assert.equal((await send(t, cheapLogin(peer))).statusCode, 429)
  })
})

forEachBackend(
  httpBackends.slice(0, 1),
  'client address: TRUST_PROXY=true',
  (ctx) => {
    test('every peer is trusted, as before, but still only for IP addresses', async () => {
      const t = ctx()
      const email = 'trust-all@example.com'
      assert.equal((await send(t, failedLogin(nextPeer(), email, '192.0.2.88'))).statusCode, 401)
      assert.deepEqual(await auditIps(t, `admin:${email}`), ['192.0.2.88'])
      const peer = nextPeer()
      assert.equal((await send(t, failedLogin(peer, 'trust-all-2@example.com', 'nope'))).statusCode, 401)
      assert.deepEqual(await auditIps(t, 'admin:trust-all-2@example.com'), [peer])
    })
  },
  { TRUST_PROXY: 'true' },
)

describe('client address: start-up warning', () => {
  const backend = httpBackends[0]!
  const warned = (logs: string[]) => logs.some((l) => /TRUST_PROXY=true/.test(l) && /"level":"warn"/.test(l))

  test('TRUST_PROXY=true in production logs a warning at start-up', async () => {
    const t = await startApp(backend, { ...PRODUCTION_ENV, TRUST_PROXY: 'true' })
    try {
      assert.ok(warned(t.logs), t.logs.join(''))
    } finally {
      await t.close()
    }
  })

  test('the default gives no such warning', async () => {
    const t = await startApp(backend, PRODUCTION_ENV)
    try {
      assert.ok(!warned(t.logs), t.logs.join(''))
    } finally {
      await t.close()
    }
  })
})
