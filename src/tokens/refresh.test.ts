import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import {
  eventAdmin,
  forEachBackend,
  login,
  logout,
  type TestApp,
  verifyToken,
  withStandardSeed,
} from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

const DAY = 86_400_000

forEachBackend(httpBackends, 'refresh-token security properties', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed(
      withStandardSeed({
        administrators: [
          eventAdmin('disabled@example.com'),
          eventAdmin('deleted@example.com'),
          eventAdmin('promoted@example.com'),
        ],
        operators: [
          { email: 'op-perm@example.com', password: 's3cret-pass', event_id: 1, mode: 0, permissions: null },
        ],
      }),
    )
  })

  const refresh = (refresh_token: string) =>
    t.request({ method: 'POST', url: '/auth/refresh', payload: { refresh_token } })

  test('rotation: a refresh issues a new pair and revokes the old refresh jti', async () => {
    const first = await login(t, 'ev1@example.com')
    const res = await refresh(first.refresh_token)
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['cache-control'], 'no-store')
    const second = res.json()
    assert.notEqual(second.refresh_token, first.refresh_token)
    assert.equal(second.token_type, 'bearer')
    assert.deepEqual(await verifyToken(t, first.refresh_token), { valid: false, claims: null })
    const fresh = await verifyToken(t, second.refresh_token)
    assert.equal(fresh.valid, true)
    assert.equal(fresh.claims?.type, 'refresh')
    const access = await verifyToken(t, second.access_token)
    assert.equal(access.claims?.type, 'access')
    assert.equal(access.claims?.sub, (await verifyToken(t, first.access_token)).claims?.sub)
    assert.equal((await refresh(second.refresh_token)).statusCode, 200, 'the rotated-to token works once')
  })

  test('refresh-race: of ten concurrent refreshes with one token exactly one wins', async () => {
    const { refresh_token } = await login(t, 'ev1@example.com')
    const answers = await Promise.all(Array.from({ length: 10 }, () => refresh(refresh_token)))
    const statuses = answers.map((r) => r.statusCode).sort()
    assert.deepEqual(statuses, [200, 401, 401, 401, 401, 401, 401, 401, 401, 401])
  })

  test('refresh-reuse: presenting a rotated token revokes the whole family', async () => {
    const stolen = await login(t, 'ev1@example.com')
    const legit = (await refresh(stolen.refresh_token)).json()
    const reuse = await refresh(stolen.refresh_token)
    assert.equal(reuse.statusCode, 401)
    assert.equal(reuse.headers['www-authenticate'], 'Bearer')
    assert.equal(
      (await refresh(legit.refresh_token)).statusCode,
      401,
      "the winner's token died with the family",
    )
    assert.deepEqual(await verifyToken(t, legit.refresh_token), { valid: false, claims: null })
    const audit = await t.db.db
      .selectFrom('audit_log')
      .select('kind')
      .where('kind', '=', 'refresh_reuse_detected')
      .execute()
    assert.ok(audit.length >= 1, 'reuse is audited')
    const other = await login(t, 'ev1@example.com')
    assert.equal((await refresh(other.refresh_token)).statusCode, 200, 'other sessions are untouched')
  })

  test('refresh-claims: claims are rebuilt from the stored records at every refresh', async () => {
    const op = await login(t, 'op-perm@example.com', 'operator')
    assert.deepEqual((await verifyToken(t, op.access_token)).claims?.permissions, {
      '1': [
        'pos:sell',
        'pos:refund',
        'topup:balance',
        'checkin:nfc',
        'checkin:manual',
        'checkin:fastpass',
        'ticket:sell',
        'ticket:scan',
      ],
    })
    await t.db.db
      .updateTable('users')
      .set({ permissions: JSON.stringify({ '1': ['ticket:scan'] }) })
      .where('email', '=', 'op-perm@example.com')
      .execute()
    const next = (await refresh(op.refresh_token)).json()
    assert.deepEqual((await verifyToken(t, next.access_token)).claims?.permissions, { '1': ['ticket:scan'] })

    const admin = await login(t, 'promoted@example.com')
    await t.db.db
      .updateTable('administrators')
      .set({ role: 'superadmin', event_ids: '' })
      .where('email', '=', 'promoted@example.com')
      .execute()
    const promoted = (await verifyToken(t, (await refresh(admin.refresh_token)).json().access_token)).claims
    assert.equal(promoted?.role, 'admin')
    assert.deepEqual(promoted?.event_ids, [])
    assert.deepEqual(Object.keys(promoted?.permissions as object), ['*'])
  })

  test('refresh-disabled: a disabled or deleted administrator cannot refresh', async () => {
    const disabled = await login(t, 'disabled@example.com')
    await t.db.db
      .updateTable('administrators')
      .set({ disabled: 1 })
      .where('email', '=', 'disabled@example.com')
      .execute()
    assert.equal((await refresh(disabled.refresh_token)).statusCode, 401)

    const deleted = await login(t, 'deleted@example.com')
    await t.db.db.deleteFrom('administrators').where('email', '=', 'deleted@example.com').execute()
    assert.equal((await refresh(deleted.refresh_token)).statusCode, 401)
    assert.equal((await verifyToken(t, deleted.refresh_token)).valid, false)
  })

  test('refresh-type: anything but a live refresh token is 401', async () => {
    const pair = await login(t, 'ev1@example.com')
    for (const token of [pair.access_token, 'not-a-jwt', `${pair.refresh_token.slice(0, -2)}xx`, '']) {
      const res = await refresh(token)
      assert.equal(res.statusCode, 401, token)
      assert.equal(res.headers['www-authenticate'], 'Bearer')
    }
  })

  test('logout: bearer required, token must be the caller’s, then it is revoked', async () => {
    const mine = await login(t, 'ev1@example.com')
    const theirs = await login(t, 'root@example.com')
    const anon = await logout(t, undefined, mine.refresh_token)
    assert.equal(anon.statusCode, 401)
    assert.equal(anon.headers['www-authenticate'], 'Bearer')
    assert.equal((await logout(t, mine.access_token, theirs.refresh_token)).statusCode, 401)
    assert.equal((await verifyToken(t, theirs.refresh_token)).valid, true, 'a refused logout revokes nothing')
    assert.equal(
      (await logout(t, mine.refresh_token, mine.refresh_token)).statusCode,
      401,
      'refresh as bearer',
    )
    assert.equal((await logout(t, mine.access_token, mine.access_token)).statusCode, 401, 'access as refresh')
    assert.equal((await logout(t, mine.access_token, 'garbage')).statusCode, 401)

    const res = await logout(t, mine.access_token, mine.refresh_token)
    assert.equal(res.statusCode, 200)
    assert.deepEqual(res.json(), { message: 'Logged out' })
    assert.deepEqual(await verifyToken(t, mine.refresh_token), { valid: false, claims: null })
    assert.equal((await refresh(mine.refresh_token)).statusCode, 401)
    assert.equal((await logout(t, mine.access_token, mine.refresh_token)).statusCode, 401, 'only once')
  })

  // Moves the suite's clock forward, so it runs last.
  test('refresh-expiry: an expired refresh token is refused at refresh and logout', async () => {
    const old = await login(t, 'ev1@example.com')
    t.clock.advance(31 * DAY)
    const res = await refresh(old.refresh_token)
    assert.equal(res.statusCode, 401)
    assert.equal((await verifyToken(t, old.refresh_token)).valid, false)
    const current = await login(t, 'ev1@example.com')
    assert.equal((await logout(t, current.access_token, old.refresh_token)).statusCode, 401)
    assert.equal((await refresh(current.refresh_token)).statusCode, 200)
  })
})
