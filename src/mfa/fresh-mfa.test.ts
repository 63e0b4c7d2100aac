import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { generateSync } from 'otplib'
import { forEachBackend, login, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { assertPerMinuteLimit } from '../../test/helpers/rate-limit.js'

// A one-hour window and access tokens that outlive it, so a stale verification is seen on a live token.
const env = { MFA_FRESHNESS_WINDOW_HOURS: '1', ACCESS_TOKEN_EXPIRE_MINUTES: '180' }

forEachBackend(
  httpBackends,
  'fresh-MFA guard on GET /admin/sensitive/ping',
  (ctx) => {
    let t: TestApp
    let plain: string
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
      plain = (await login(t, 'ev1@example.com')).access_token
    })

    const ping = (token?: string) =>
      t.request({ method: 'GET', url: '/admin/sensitive/ping', ...(token ? { token } : {}) })

    /** Enrolled once: while MFA is on, a password-only token may not enrol again. */
    let secret = ''
    async function verifiedPair(): Promise<{ access_token: string; refresh_token: string }> {
      if (!secret) {
        const setup = await t.request({ method: 'POST', url: '/admin/mfa/setup', token: plain })
        assert.equal(setup.statusCode, 200, setup.body)
        secret = setup.json().secret
      }
      // Just after a step boundary, so the code cannot age out before the server checks it.
      t.clock.advance(30_000 - (t.clock.now() % 30_000) + 100)
      const code = generateSync({ secret, epoch: Math.floor(t.clock.now() / 1000) })
      const res = await t.request({
        method: 'POST',
        url: '/admin/mfa/verify',
        token: plain,
        payload: { code },
      })
      assert.equal(res.statusCode, 200, res.body)
      return res.json()
    }
    const verifiedToken = async () => (await verifiedPair()).access_token
    const refresh = async (refresh_token: string) => {
      const res = await t.request({ method: 'POST', url: '/auth/refresh', payload: { refresh_token } })
      assert.equal(res.statusCode, 200, res.body)
      return res.json() as { access_token: string; refresh_token: string }
    }

    test('a token that never went through MFA: 403 require_mfa / mfa_never', async () => {
      const res = await ping(plain)
      assert.equal(res.statusCode, 403)
      const body = res.json()
      assert.deepEqual(Object.keys(body).sort(), ['action', 'detail', 'reason'])
      assert.equal(body.action, 'require_mfa')
      assert.equal(body.reason, 'mfa_never')
    })

    test('fresh MFA: 200 {status: ok} until the window ends, then 403 mfa_stale', async () => {
      const token = await verifiedToken()
      const ok = await ping(token)
      assert.equal(ok.statusCode, 200)
      assert.deepEqual(ok.json(), { status: 'ok' })
      t.clock.advance(3600_000 - 5_000)
      assert.equal((await ping(token)).statusCode, 200, 'inside the window')
      t.clock.advance(6_000)
      const stale = await ping(token)
      assert.equal(stale.statusCode, 403)
      assert.equal(stale.json().action, 'require_mfa')
      assert.equal(stale.json().reason, 'mfa_stale')
    })

    test('a refresh keeps the time of the MFA verification: fresh stays fresh, stale stays stale', async () => {
      const pair = await verifiedPair()
      t.clock.advance(20 * 60_000)
      const next = await refresh(pair.refresh_token)
      assert.equal((await ping(next.access_token)).statusCode, 200)
      t.clock.advance(3600_000)
      const later = await refresh(next.refresh_token)
      const res = await ping(later.access_token)
      assert.equal(res.statusCode, 403)
      assert.equal(res.json().reason, 'mfa_stale', 'a refresh renewed the MFA time')
      const plain = await refresh((await login(t, 'ev1@example.com')).refresh_token)
      assert.equal((await ping(plain.access_token)).json().reason, 'mfa_never')
    })

    test('no token: 401; an operator: 403 without require_mfa', async () => {
      assert.equal((await ping()).statusCode, 401)
      const op = (await login(t, 'op@example.com', 'operator')).access_token
      const res = await ping(op)
      assert.equal(res.statusCode, 403)
      assert.equal(res.json().action, undefined)
    })

    test('rate limit: 60 per minute per address', async () => {
      await assertPerMinuteLimit(t, 60, () => ({ method: 'GET', url: '/admin/sensitive/ping', token: plain }))
    })
  },
  env,
)
