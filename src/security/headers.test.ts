import assert from 'node:assert/strict'
import fs from 'node:fs'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { before, test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { generateSync } from 'otplib'
import { forEachBackend, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { SmsInbox } from '../../test/helpers/sms.js'
import { createApiKey } from '../api-keys/api-keys.store.js'

type Operation = { method: string; path: string; url: string }

/** The rate-limit table of docs/security.md: `METHOD /path` → requests per minute. */
function documentedLimits(): Record<string, number> {
  const doc = fs.readFileSync(path.join(import.meta.dirname, '../../docs/security.md'), 'utf8')
  const section = doc.slice(doc.indexOf('## Rate limits'), doc.indexOf('## Token rules'))
  return Object.fromEntries(
    [...section.matchAll(/^\|\s*`([A-Z]+ \S+)`\s*\|\s*(\d+)\s*\|$/gm)].map((m) => [m[1]!, Number(m[2])]),
  )
}

/** Every operation of the OpenAPI document, with placeholder path parameters. */
async function operations(t: TestApp): Promise<Operation[]> {
  const doc = (await t.request({ method: 'GET', url: '/openapi.json' })).json() as {
    paths: Record<string, Record<string, unknown>>
  }
  const sample: Record<string, string> = { token: 'x'.repeat(43), transfer_uid: '0'.repeat(32) }
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.keys(ops).map((method) => ({
      method: method.toUpperCase(),
      path,
      url: path.replace(/\{(\w+)\}/g, (_m, name: string) => sample[name] ?? '1'),
    })),
  )
}

function assertSecurityHeaders(res: LightMyRequestResponse, what: string) {
  assert.equal(res.headers['x-content-type-options'], 'nosniff', `${what}: nosniff`)
  assert.ok(res.headers['content-security-policy'], `${what}: a Content-Security-Policy`)
  assert.equal(res.headers['x-powered-by'], undefined, `${what}: no x-powered-by`)
  assert.equal(res.headers.server, undefined, `${what}: no server banner`)
  assert.equal(res.headers['access-control-allow-origin'], undefined, `${what}: CORS closed by default`)
}

const sms = new SmsInbox()

forEachBackend(
  httpBackends,
  'security headers and cache control',
  (ctx) => {
    let t: TestApp
    let eventKey: string
    before(async () => {
      t = ctx()
      await t.seed(
        withStandardSeed({
          operators: [{ email: 'pos@example.com', password: 's3cret-pass', event_id: 1, mode: 0 }],
        }),
      )
      eventKey = (
        await createApiKey(t.db.db, {
          event_id: 1,
          name: 'headers',
          scopes: ['api:read', 'api:write'],
          created_by: null,
          now: t.clock.now(),
        })
      ).plaintext
    })

    test('every documented operation answers with the security headers and no-store, from any Origin', async () => {
      const ops = await operations(t)
      assert.ok(ops.length >= 40, `the document lists the routes (${ops.length})`)
      const limits: Record<string, number> = {}
      for (const { method, path: route, url } of ops) {
        const res = await t.request({
          method: method as 'GET',
          url,
          headers: { origin: 'https://evil.example' },
          ...(['POST', 'PUT', 'PATCH'].includes(method) ? { payload: {} } : {}),
        })
        assertSecurityHeaders(res, `${method} ${url} (${res.statusCode})`)
        // The public key set and the OAuth metadata are meant to be cached by scanners, clients and
        // proxies; they hold no secret.
        if (
          ['GET /.well-known/jwks.json', 'GET /.well-known/oauth-authorization-server'].includes(
            `${method} ${route}`,
          )
        )
          assert.equal(res.headers['cache-control'], 'public, max-age=300')
        else assert.equal(res.headers['cache-control'], 'no-store', `${method} ${url}: no-store`)
        const limit = res.headers['x-ratelimit-limit']
        if (limit !== undefined) limits[`${method} ${route}`] = Number(limit)
      }
      assert.deepEqual(limits, documentedLimits(), 'the rate-limit table of docs/security.md')
    })

    test('errors outside any route, the document and the docs page carry them too', async () => {
      for (const url of ['/no-such-route', '/openapi.json', '/docs/static/index.html', '/docs']) {
        const res = await t.request({ method: 'GET', url })
        assertSecurityHeaders(res, `GET ${url} (${res.statusCode})`)
      }
      const malformed = await t.request({
        method: 'POST',
        url: '/auth/login',
        headers: { 'content-type': 'application/json' },
        payload: '{"email":',
      })
      assert.equal(malformed.statusCode, 422)
      assertSecurityHeaders(malformed, 'malformed JSON')
      assert.equal(malformed.headers['cache-control'], 'no-store')
    })

    test('JSON answers carry the API set; HTML pages the whole helmet set', async () => {
      const json = await t.request({ method: 'GET', url: '/health' })
      for (const name of ['x-frame-options', 'referrer-policy', 'cross-origin-resource-policy'])
        assert.ok(json.headers[name], `JSON: ${name}`)
      assert.equal(json.headers['x-dns-prefetch-control'], undefined, 'JSON: no document-only headers')
      for (const url of ['/docs/', '/dashboard/login']) {
        const page = await t.request({ method: 'GET', url })
        assert.match(String(page.headers['content-type']), /^text\/html/, url)
        assertSecurityHeaders(page, url)
        assert.equal(page.headers['x-dns-prefetch-control'], 'off', `${url}: x-dns-prefetch-control`)
        assert.equal(page.headers['cross-origin-opener-policy'], 'same-origin', `${url}: COOP`)
        assert.equal(page.headers['x-frame-options'], 'SAMEORIGIN', `${url}: x-frame-options`)
      }
    })

    test('over a real socket: no Server or X-Powered-By banner', async () => {
      await t.app.listen({ port: 0, host: '127.0.0.1' })
      const { port } = t.app.server.address() as AddressInfo
      const res = await fetch(`http://127.0.0.1:${port}/health`)
      assert.equal(res.status, 200)
      assert.equal(res.headers.get('server'), null)
      assert.equal(res.headers.get('x-powered-by'), null)
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff')
    })

    test('every answer that carries a token, key or secret is Cache-Control: no-store', async () => {
      const answers: [string, LightMyRequestResponse][] = []
      const post = async (what: string, url: string, payload: object, extra: object = {}) => {
        const res = await t.request({
          method: 'POST',
          url,
          payload: payload as Record<string, unknown>,
          ...extra,
        })
        assert.ok(res.statusCode < 300, `${what}: ${res.statusCode} ${res.body}`)
        answers.push([what, res])
        return res.json()
      }
      const pair = await post('login', '/auth/login', { email: 'ev1@example.com', password: 's3cret-pass' })
      await post('refresh', '/auth/refresh', { refresh_token: pair.refresh_token })
      const { access_token } = await login(t, 'ev1@example.com')
      const setup = await post('mfa setup', '/admin/mfa/setup', {}, { token: access_token })
      // With MFA on, credentials are created from the verified (fresh) token.
      const verified = await post(
        'mfa verify',
        '/admin/mfa/verify',
        { code: generateSync({ secret: setup.secret, epoch: Math.floor(t.clock.now() / 1000) }) },
        { token: access_token },
      )
      await post('offline token', '/tokens/offline', { event_id: 1 }, { token: verified.access_token })
      await post(
        'api key',
        '/tokens/api-key',
        { event_id: 1, name: 'k', scopes: ['api:read'] },
        { token: verified.access_token },
      )
      await post('customer login', '/auth/login/customer', {
        phone: '+4915100000001',
        password: 's3cret-pass',
      })
      await post('phone code', '/auth/login/phone', { phone: '+4915100000001' })
      await post('phone verify', '/auth/login/phone/verify', {
        phone: '+4915100000001',
        code: sms.codeFor('+4915100000001'),
      })
      const phone = '+4915100000999'
      await post('messaging start', '/verify/messaging/start', { phone })
      const checked = await post('messaging check', '/verify/messaging/check', {
        phone,
        code: sms.codeFor(phone),
      })
      await post('register', '/auth/register', {
        phone,
        password: 'new-pass-123',
        verification_token: checked.verification_token,
      })
      await post('device login', '/auth/login/device', { dev_mac: 'AA:BB:CC:DD:EE:01', event_id: 1 })
      const device = await t.db.db
        .selectFrom('devices')
        .select('id')
        .where('dev_mac', '=', 'AA:BB:CC:DD:EE:01')
        .executeTakeFirstOrThrow()
      const operator = await t.db.db
        .selectFrom('users')
        .select('id')
        .where('email', '=', 'op@example.com')
        .executeTakeFirstOrThrow()
      await post(
        'device token',
        `/devices/${device.id}/token`,
        { operator_id: operator.id },
        { token: verified.access_token },
      )
      await post('operator token', '/devices/operator-token', {
        email: 'pos@example.com',
        password: 's3cret-pass',
        dev_type: 'POS',
        dev_mac: 'AA:BB:CC:DD:EE:01',
      })
      const webhook = await t.request({
        method: 'PUT',
        url: '/companies/webhook',
        headers: { api_key: eventKey },
        payload: { url: 'http://127.0.0.1:9/hook' },
      })
      assert.equal(webhook.statusCode, 200, webhook.body)
      assert.ok(webhook.json().secret)
      answers.push(['webhook secret', webhook])
      for (const [what, res] of answers) assert.equal(res.headers['cache-control'], 'no-store', what)
    })
  },
  { WEBHOOK_ALLOW_PRIVATE: 'true' },
  () => ({ sms }),
)

forEachBackend(
  httpBackends,
  'CORS opened for configured origins',
  (ctx) => {
    test('a listed origin gets a working preflight and the allow-origin header; others get nothing', async () => {
      const t = ctx()
      const preflight = await t.request({
        method: 'OPTIONS',
        url: '/tokens/verify',
        headers: {
          origin: 'https://app.example.com',
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type,authorization',
        },
      })
      assert.equal(preflight.statusCode, 204)
      assert.equal(preflight.headers['access-control-allow-origin'], 'https://app.example.com')
      assert.match(String(preflight.headers['access-control-allow-methods']), /POST/)
      assert.match(String(preflight.headers['access-control-allow-headers']), /authorization/)
      const actual = await t.request({
        method: 'POST',
        url: '/tokens/verify',
        headers: { origin: 'https://app.example.com' },
        payload: { token: 'x' },
      })
      assert.equal(actual.headers['access-control-allow-origin'], 'https://app.example.com')
      assertSecurityHeaders(
        await t.request({
          method: 'POST',
          url: '/tokens/verify',
          headers: { origin: 'https://evil.example' },
          payload: { token: 'x' },
        }),
        'an unlisted origin',
      )
      const evilPreflight = await t.request({
        method: 'OPTIONS',
        url: '/tokens/verify',
        headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
      })
      assert.equal(evilPreflight.headers['access-control-allow-origin'], undefined)
    })
  },
  { CORS_ORIGINS: 'https://app.example.com' },
)
