import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import { forEachBackend, STANDARD_SEED, startApp, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { sample } from '../../test/helpers/scrape.js'
import { SmsInbox } from '../../test/helpers/sms.js'
import { addressKey } from '../platform/client-address.js'

/**
 * Audit of 2026-11-29, F3 (Low; docs/security.md): "IPv6 callers get a budget per address". A caller with a /64 (every home line)
 * rotated addresses and got a fresh per-address budget each time, on login, SMS and verify; SMS had no
 * global budget, so a botnet could spend the SMS bill. Every per-address limit now counts an IPv6
 * caller by its /64 (`addressKey`), and SMS_GLOBAL_RATE_LIMIT caps the texts of the whole fleet a
 * minute (in Redis when configured). Both settings are in /metrics.
 *
 * `app.inject()` connects from 127.0.0.1, a trusted proxy by default, so X-Forwarded-For names the
 * caller here as a proxy in front of the service would.
 */
const METRICS_TOKEN = 'scrape-token-0123456789abcdef'

let prefixCounter = 0
/** A /64 of its own per test (2001:db8:<n>:<n>::/64), so budgets never leak between tests. */
function nextPrefix(): (host: number) => string {
  prefixCounter++
  const n = (prefixCounter + process.pid) & 0xffff
  // Hosts written in different forms: full, compressed and with leading zeros all name the same /64.
  return (host) =>
    host % 3 === 0
      ? `2001:db8:${n.toString(16)}:1:${host.toString(16)}:0:0:${(host * 7).toString(16)}`
      : host % 3 === 1
        ? `2001:0db8:${n.toString(16).padStart(4, '0')}:0001::${host.toString(16)}`
        : `2001:db8:${n.toString(16)}:1:ffff:${host.toString(16)}::1`
}

function from(t: TestApp, address: string, opts: InjectOptions): Promise<LightMyRequestResponse> {
  return t.app.inject({ ...opts, headers: { ...opts.headers, 'x-forwarded-for': address } })
}

/** A cheap /auth/login request (422 before any password work) that counts against its limit. */
const cheapLogin: InjectOptions = { method: 'POST', url: '/auth/login', payload: {} }

describe('addressKey: the key of every per-address budget', () => {
  test('an IPv6 address is keyed by its /64, whatever its written form', () => {
    assert.equal(addressKey('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64')
    assert.equal(addressKey('2001:0DB8:0001:0002::9'), '2001:db8:1:2::/64')
    assert.equal(addressKey('2001:db8:1:2:ffff::1'), '2001:db8:1:2::/64')
    assert.equal(addressKey('fe80::1%eth0'), 'fe80:0:0:0::/64')
    assert.equal(addressKey('::1'), '0:0:0:0::/64')
    assert.notEqual(addressKey('2001:db8:1:3::1'), addressKey('2001:db8:1:2::1'))
  })

  test('IPv4, and IPv4 written as IPv6, keep their own address', () => {
    assert.equal(addressKey('203.0.113.7'), '203.0.113.7')
    assert.equal(addressKey('::ffff:203.0.113.7'), '203.0.113.7')
    assert.equal(addressKey('::ffff:cb00:7107'), '203.0.113.7')
    assert.notEqual(addressKey('203.0.113.8'), addressKey('203.0.113.7'))
  })
})

forEachBackend(
  httpBackends,
  'F3: per-address limits count an IPv6 caller by its /64',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
    })

    test('F3 login: rotating addresses inside one /64 shares one budget', async () => {
      const host = nextPrefix()
      for (let i = 1; i <= 10; i++) assert.equal((await from(t, host(i), cheapLogin)).statusCode, 422)
      const refused = await from(t, host(1000), cheapLogin)
      assert.equal(refused.statusCode, 429, refused.body)
      // The next /64 is another caller.
      assert.equal((await from(t, nextPrefix()(1), cheapLogin)).statusCode, 422)
    })

    test('F3 SMS: code requests from rotating addresses inside one /64 share one budget', async () => {
      const host = nextPrefix()
      const start = (i: number) =>
        from(t, host(i), {
          method: 'POST',
          url: '/verify/messaging/start',
          payload: { phone: `+4915220${String(prefixCounter * 100 + i).padStart(6, '0')}` },
        })
      for (let i = 1; i <= 5; i++) assert.equal((await start(i)).statusCode, 200)
      assert.equal((await start(6)).statusCode, 429)
    })

    test('F3 verify: anonymous callers from one /64 share the 600 a minute', async () => {
      const host = nextPrefix()
      const verify = (i: number) =>
        from(t, host(i), { method: 'POST', url: '/tokens/verify', payload: { token: 'not-a-token' } })
      for (let i = 1; i <= 600; i++) {
        const res = await verify(i)
        assert.notEqual(res.statusCode, 429, `request ${i} refused early`)
      }
      const refused = await verify(601)
      assert.equal(refused.statusCode, 429, refused.body)
      assert.equal(refused.headers['x-ratelimit-limit'], '600')
    })

    test('F3 partner without a key: one /64 shares the 120 a minute', async () => {
      const host = nextPrefix()
      const get = (i: number) => from(t, host(i), { method: 'GET', url: '/companies/tickets' })
      for (let i = 1; i <= 120; i++) assert.equal((await get(i)).statusCode, 401)
      assert.equal((await get(121)).statusCode, 429)
    })

    test('the /64 is in /metrics', async () => {
      const res = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
      assert.equal(sample(res.body, 'wristband_rate_limit_ipv6_prefix_length'), 64)
    })
  },
  { METRICS_TOKEN },
)

/** Asks for a verification code: a fresh number from a fresh IPv4 address, so only the global budget binds. */
let phoneCounter = 0
function askCode(t: TestApp): Promise<LightMyRequestResponse> {
  phoneCounter++
  return t.request({
    method: 'POST',
    url: '/verify/messaging/start',
    payload: { phone: `+4917650${String(phoneCounter).padStart(6, '0')}` },
  })
}

async function scrape(t: TestApp): Promise<string> {
  const res = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
  assert.equal(res.statusCode, 200, res.body)
  return res.body
}

const SMS_LIMIT = 4

eachBackend(httpBackends, 'F3 SMS_GLOBAL_RATE_LIMIT: one budget of texts a minute', (backend) => {
  const sms = new SmsInbox()
  const env = { SMS_GLOBAL_RATE_LIMIT: String(SMS_LIMIT), METRICS_TOKEN }
  let p: ProvisionedBackend
  let a: TestApp
  let b: TestApp | undefined
  // With Redis the budget is the fleet's: two instances on one storage share it. Without, each
  // instance counts in process (one instance here).
  const fleet = backend.name.includes('redis')
  before(async () => {
    p = await backend.provision()
    a = await startApp(backend, env, p, { sms })
    if (fleet) b = await startApp(backend, env, p, { sms })
  })
  after(async () => {
    await a?.close()
    await b?.close()
    await p?.dispose()
  })

  test('F3: the SMS budget refuses the text past SMS_GLOBAL_RATE_LIMIT from many addresses and numbers', async () => {
    const second = b ?? a
    for (let i = 0; i < SMS_LIMIT; i++) {
      const res = await askCode(i % 2 === 0 ? a : second)
      assert.equal(res.statusCode, 200, res.body)
    }
    const refused = await askCode(second)
    assert.equal(refused.statusCode, 429, refused.body)
    assert.equal(refused.json().error, 'rate_limit_exceeded')
    assert.equal(refused.json().limit, SMS_LIMIT)
    assert.ok(Number(refused.headers['retry-after']) >= 1)
    assert.equal(sms.messages.length, SMS_LIMIT, 'the refused text never reached the provider')

    const metrics = await scrape(second)
    assert.equal(sample(metrics, 'wristband_sms_global_limit_per_minute'), SMS_LIMIT)
    assert.equal(sample(metrics, 'wristband_sms_sends_total', { outcome: 'refused' }), 1)

    // The window ends with the minute: texts go out again.
    a.clock.advance(61_000)
    if (b) b.clock.advance(61_000)
    if (!fleet) assert.equal((await askCode(a)).statusCode, 200)
  })
})
