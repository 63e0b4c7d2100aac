import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { BACKOFF_POLICY } from '../platform/backoff.js'

forEachBackend(httpBackends, 'per-account login back-off', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
  })
  const attempt = (password: string, email = 'ev1@example.com') =>
    t.request({ method: 'POST', url: '/auth/login', payload: { email, password } })

  test('failures beyond the free ones lock the account, whatever address they come from', async () => {
    // Every request comes from a new X-Forwarded-For address (t.request), so per-address limits never apply.
    for (let i = 0; i < BACKOFF_POLICY.FREE_FAILURES; i++)
      assert.equal((await attempt('wrong-password')).statusCode, 401)
    assert.equal(
      (await attempt('wrong-password')).statusCode,
      401,
      'the failure that starts the lock is still answered',
    )
    const locked = await attempt('s3cret-pass')
    assert.equal(locked.statusCode, 429, 'the right password is refused while locked')
    assert.equal(locked.json().error, 'rate_limit_exceeded')
    assert.ok(Number(locked.headers['retry-after']) >= 1)
    // Another account is not affected.
    assert.equal((await attempt('s3cret-pass', 'root@example.com')).statusCode, 200)
  })

  test('the lock lapses: the real user gets in afterwards and the count resets', async () => {
    t.clock.advance(BACKOFF_POLICY.MAX_LOCK_MS + 1)
    assert.equal((await attempt('s3cret-pass')).statusCode, 200)
    assert.equal((await attempt('wrong-password')).statusCode, 401)
    assert.equal((await attempt('s3cret-pass')).statusCode, 200, 'a success resets the count')
  })

  test('an unknown e-mail backs off the same way, so the lock reveals nothing', async () => {
    for (let i = 0; i <= BACKOFF_POLICY.FREE_FAILURES; i++) await attempt('x', 'ghost@example.com')
    assert.equal((await attempt('x', 'ghost@example.com')).statusCode, 429)
  })

  test('the lock is capped: however many failures, it never exceeds the maximum', async () => {
    for (let i = 0; i < 40; i++) {
      await attempt('wrong', 'nm-cap@example.com')
      t.clock.advance(BACKOFF_POLICY.MAX_LOCK_MS)
    }
    const res = await attempt('wrong', 'nm-cap@example.com')
    assert.ok(Number(res.headers['retry-after'] ?? 0) <= BACKOFF_POLICY.MAX_LOCK_MS / 1000)
  })
})
