import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import {
  type Backend,
  get,
  type ServedService,
  serve,
  startBackends,
} from '../../packages/verifier/src/test-support.js'
import { createVerifier } from '../../packages/verifier/src/verifier.js'
import { forEachBackend, login, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

/**
 * POST /tokens/verify answers `valid: true` for refresh and offline tokens too, as the specification
 * says. A backend guarded by @wristband/verifier must not take a 30-day refresh token (or a device's
 * offline token) for an access token: its guards accept `access` tokens only, unless the backend lists
 * other types in `types`.
 */
forEachBackend(httpBackends, 'verifier guards: only access tokens unless told otherwise', (ctx) => {
  let t: TestApp
  let svc: ServedService
  let strict: Backend[]
  let offlineToo: Backend[]
  let tokens: { access: string; refresh: string; offline: string }

  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    svc = await serve(t)
    const verifier = () => createVerifier({ baseUrl: svc.baseUrl, timeoutMs: 2000 })
    strict = await startBackends(verifier())
    offlineToo = await startBackends(verifier(), { types: ['access', 'offline'] })
    const op = await login(t, 'op@example.com', 'operator')
    const device = await t.request({
      method: 'POST',
      url: '/auth/login/device',
      payload: { dev_mac: 'AA:BB:CC:DD:EE:01', event_id: 1 },
    })
    assert.equal(device.statusCode, 200, device.body)
    tokens = { access: op.access_token, refresh: op.refresh_token, offline: device.json().offline_token }
  })
  after(async () => {
    for (const b of [...(strict ?? []), ...(offlineToo ?? [])]) await b.close()
  })

  test('the service itself calls refresh and offline tokens valid (the reason for the guard check)', async () => {
    for (const token of [tokens.refresh, tokens.offline]) {
      const res = await t.request({ method: 'POST', url: '/tokens/verify', payload: { token } })
      assert.equal(res.json().valid, true)
    }
  })

  for (const kind of ['fastify', 'express'] as const) {
    describe(kind, () => {
      test('a refresh or offline token is 401 at a default guard; an access token passes', async () => {
        const b = strict.find((x) => x.name === kind)!
        assert.equal((await get(b, '/me', tokens.access)).status, 200)
        assert.equal((await get(b, '/events/1/scan', tokens.access)).status, 200)
        for (const token of [tokens.refresh, tokens.offline]) {
          for (const path of ['/me', '/events/1/scan']) {
            const res = await get(b, path, token)
            assert.equal(res.status, 401, `${path}: ${await res.text()}`)
            assert.equal(res.headers.get('www-authenticate'), 'Bearer')
          }
        }
      })

      test('`types` opens a guard to the listed types only', async () => {
        const b = offlineToo.find((x) => x.name === kind)!
        assert.equal((await get(b, '/me', tokens.offline)).status, 200)
        assert.equal((await get(b, '/me', tokens.access)).status, 200)
        assert.equal((await get(b, '/me', tokens.refresh)).status, 401)
      })
    })
  }
})
