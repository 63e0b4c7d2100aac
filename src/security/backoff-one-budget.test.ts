import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { eventAdmin, forEachBackend, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { postSignIn } from '../../test/helpers/dashboard.js'
import { BACKOFF_POLICY } from '../platform/backoff.js'

/**
 * Audit of 2026-11-25 (docs/security.md): the dashboard and `/auth/login` counted the failures of one
 * password separately, so an attacker had twice the free guesses. Both spend the account's one budget
 * now (`passwordBudget`), in either order, and a success at either forgets it. Every request comes from
 * its own address (t.request), so no per-address limit takes part.
 */
forEachBackend(httpBackends, 'one back-off budget per password', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed(
      withStandardSeed({
        administrators: [eventAdmin('budget-admin@example.com'), eventAdmin('budget-reset@example.com')],
        network_managers: [{ email: 'budget-nm@example.com', password: 's3cret-pass', event_ids: [1] }],
      }),
    )
  })
  const api = (email: string, password: string, role: 'admin' | 'network_manager' = 'admin') =>
    t.request({ method: 'POST', url: '/auth/login', payload: { email, password, role } })
  const dashboard = async (email: string, password: string) =>
    (await postSignIn(t, email, password)).statusCode
  const half = Math.ceil((BACKOFF_POLICY.FREE_FAILURES + 1) / 2)

  test('one back-off budget across dashboard and API', async () => {
    // Half of the free failures and the one that starts the lock at the dashboard, the rest at the API.
    for (let i = 0; i < half; i++) assert.equal(await dashboard('budget-admin@example.com', 'wrong'), 401)
    for (let i = half; i <= BACKOFF_POLICY.FREE_FAILURES; i++)
      assert.equal((await api('budget-admin@example.com', 'wrong')).statusCode, 401)
    const locked = await api('budget-admin@example.com', 's3cret-pass')
    assert.equal(locked.statusCode, 429, 'the API did not count the dashboard failures')
    assert.ok(Number(locked.headers['retry-after']) >= 1)
    assert.equal(await dashboard('budget-admin@example.com', 's3cret-pass'), 429)
    t.clock.advance(BACKOFF_POLICY.MAX_LOCK_MS + 1)
    assert.equal(await dashboard('budget-admin@example.com', 's3cret-pass'), 303)
  })

  test('the other way round, for a network manager: API failures lock the dashboard', async () => {
    for (let i = 0; i < half; i++)
      assert.equal((await api('budget-nm@example.com', 'wrong', 'network_manager')).statusCode, 401)
    for (let i = half; i <= BACKOFF_POLICY.FREE_FAILURES; i++)
      assert.equal(await dashboard('budget-nm@example.com', 'wrong'), 401)
    assert.equal(await dashboard('budget-nm@example.com', 's3cret-pass'), 429)
    assert.equal((await api('budget-nm@example.com', 's3cret-pass', 'network_manager')).statusCode, 429)
  })

  test('a success at the dashboard forgets the failures at the API', async () => {
    const almost = BACKOFF_POLICY.FREE_FAILURES - 1
    for (let i = 0; i < almost; i++)
      assert.equal((await api('budget-reset@example.com', 'wrong')).statusCode, 401)
    assert.equal(await dashboard('budget-reset@example.com', 's3cret-pass'), 303)
    for (let i = 0; i < almost; i++)
      assert.equal((await api('budget-reset@example.com', 'wrong')).statusCode, 401)
    assert.equal((await api('budget-reset@example.com', 's3cret-pass')).statusCode, 200)
  })
})
