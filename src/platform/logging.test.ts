import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import {
  forEachBackend,
  login,
  logout,
  STANDARD_SEED,
  TEST_SECRET,
  type TestApp,
} from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

const PASSWORD = 'Log-Probe-Passw0rd-7731'
const WRONG_PASSWORD = 'Wrong-Probe-Passw0rd-9946'

forEachBackend(
  httpBackends,
  'logs',
  (ctx) => {
    let t: TestApp
    const secrets: string[] = [PASSWORD, WRONG_PASSWORD, TEST_SECRET]
    before(async () => {
      t = ctx()
      await t.seed({
        ...STANDARD_SEED,
        administrators: [{ email: 'logged@example.com', password: PASSWORD, role: 'admin', event_ids: [1] }],
      })
      // A representative session: sign-ins, failures, refreshes, verifies, logout, malformed input.
      const pair = await login(t, 'logged@example.com', 'admin', PASSWORD)
      const failed = await t.request({
        method: 'POST',
        url: '/auth/login',
        payload: { email: 'logged@example.com', password: WRONG_PASSWORD },
      })
      assert.equal(failed.statusCode, 401)
      await t.request({
        method: 'POST',
        url: '/auth/login',
        payload: { email: 'logged@example.com', password: WRONG_PASSWORD, extra: PASSWORD },
      })
      await t.request({
        method: 'POST',
        url: '/auth/login',
        payload: `{"email": "logged@example.com", "password": "${PASSWORD}"`,
        headers: { 'content-type': 'application/json' },
      })
      const next = (
        await t.request({
          method: 'POST',
          url: '/auth/refresh',
          payload: { refresh_token: pair.refresh_token },
        })
      ).json()
      await t.request({
        method: 'POST',
        url: '/auth/refresh',
        payload: { refresh_token: pair.refresh_token },
      })
      for (const token of [pair.access_token, next.access_token, next.refresh_token])
        await t.request({ method: 'POST', url: '/tokens/verify', payload: { token } })
      await t.request({ method: 'GET', url: '/admin/me', token: next.access_token })
      await t.request({
        method: 'GET',
        url: `/admin/me?token=${next.access_token}`,
        token: next.access_token,
      })
      await logout(t, next.access_token, next.refresh_token)
      for (const token of [pair.access_token, pair.refresh_token, next.access_token, next.refresh_token]) {
        secrets.push(token)
        // A JWT's signature alone is enough to matter; its payload alone is harmless but still a leak sign.
        secrets.push(token.split('.')[2]!)
      }
    })

    test('no password, token or signing secret appears in any log line', () => {
      assert.ok(t.logs.length > 20, `only ${t.logs.length} lines captured`)
      for (const line of t.logs)
        for (const s of secrets) assert.ok(!line.includes(s), `secret leaked into log line: ${line}`)
    })

    test('every line is JSON, and every line about a request carries its reqId', () => {
      let requestLines = 0
      for (const line of t.logs) {
        const entry = JSON.parse(line)
        if ('req' in entry || 'res' in entry || 'responseTime' in entry) {
          requestLines++
          assert.equal(typeof entry.reqId, 'string', line)
        }
      }
      assert.ok(requestLines >= 20, `only ${requestLines} request lines`)
    })

    test('a given X-Request-Id is echoed and used in the log; an unusable one is replaced', async () => {
      const id = 'probe-req-4711'
      const res = await t.request({ method: 'GET', url: '/health', headers: { 'x-request-id': id } })
      assert.equal(res.headers['x-request-id'], id)
      const lines = t.logs.map((l) => JSON.parse(l)).filter((e) => e.reqId === id)
      assert.ok(lines.length >= 2, 'incoming and completed lines carry the given id')

      const odd = await t.request({
        method: 'GET',
        url: '/health',
        headers: { 'x-request-id': 'has spaces\nand a newline' },
      })
      assert.match(String(odd.headers['x-request-id']), /^[0-9a-f-]{36}$/)
      const generated = await t.request({ method: 'GET', url: '/health' })
      assert.match(String(generated.headers['x-request-id']), /^[0-9a-f-]{36}$/)
      assert.notEqual(generated.headers['x-request-id'], odd.headers['x-request-id'])
    })
  },
  { LOG_LEVEL: 'trace' },
)
