import assert from 'node:assert/strict'
import path from 'node:path'
import { before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import {
  forEachBackend,
  login,
  logout,
  revokedApiKey,
  STANDARD_SEED,
  type TestApp,
  verifyToken,
  withTwoInstances,
} from '../../test/helpers/app.js'
import { backends } from '../../test/helpers/backends.js'
import { until } from '../../test/helpers/until.js'
import { createTokenAuthority } from './authority.js'
import { REVOCATION_PAGE } from './revocations.js'
import { insertRevocations } from './revocations.store.js'

/**
 * Memory for what is actually revoked: a refresh, a logout and a detected reuse put
 * nothing on the revocation list (each instance's memory and Redis copy); the refresh-token rows
 * refuse those tokens, at once on every instance. The list is read in pages, and a Redis copy marked
 * complete is not rewritten by the next instance that starts.
 */

const listSize = async (t: TestApp) => {
  const r = await t.db.db
    .selectFrom('revoked_tokens')
    .select((eb) => eb.fn.countAll().as('n'))
    .executeTakeFirstOrThrow()
  return Number(r.n)
}

const refresh = (t: TestApp, refresh_token: string) =>
  t.request({ method: 'POST', url: '/auth/refresh', payload: { refresh_token } })

forEachBackend(
  backends,
  'refresh tokens are refused through their family state, not the revocation list',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
    })

    test('rotations, a logout and a reuse add no revocation entry; every ended token is still refused', async () => {
      const before = await listSize(t)
      const first = await login(t, 'ev1@example.com')
      let current = first.refresh_token
      const rotatedAway: string[] = []
      for (let i = 0; i < 5; i++) {
        const res = await refresh(t, current)
        assert.equal(res.statusCode, 200, res.body)
        rotatedAway.push(current)
        current = res.json().refresh_token
      }
      assert.equal(await listSize(t), before, 'five rotations: no entry')
      for (const token of rotatedAway)
        assert.deepEqual(
          await verifyToken(t, token),
          { valid: false, claims: null },
          'a rotated token is refused',
        )
      assert.equal((await verifyToken(t, current)).valid, true, 'the current token is good')

      // Reuse: a rotated token comes back, the whole family ends, through its rows.
      assert.equal((await refresh(t, rotatedAway[0]!)).statusCode, 401)
      assert.equal((await refresh(t, current)).statusCode, 401, 'the family died')
      assert.equal((await verifyToken(t, current)).valid, false)

      const other = await login(t, 'ev1@example.com')
      assert.equal((await logout(t, other.access_token, other.refresh_token)).statusCode, 200)
      assert.equal((await verifyToken(t, other.refresh_token)).valid, false, 'logged out: refused')
      assert.equal((await refresh(t, other.refresh_token)).statusCode, 401)
      assert.equal(await listSize(t), before, 'reuse and logout: no entry either')

      // What is revoked in its own right is on the list, and refused.
      const key = await revokedApiKey(t)
      assert.equal(await listSize(t), before + 1)
      assert.equal((await verifyToken(t, key)).valid, false)
    })

    test('the revocation list is loaded page by page (past a page, by a child process): every entry is refused', async () => {
      const now = t.clock.now()
      const entries = Array.from({ length: REVOCATION_PAGE * 2 + 7 }, (_, i) => ({
        jti: `paged-${String(i).padStart(6, '0')}`,
        expiresAt: now + 3_600_000,
      }))
      for (let i = 0; i < entries.length; i += 1000)
        await insertRevocations(t.db.db, now, entries.slice(i, i + 1000))
      // New authorities over the same storage, as a starting instance builds them; the second with a
      // DATA_DIR where the child cannot write its file (under a file), so it reads the list itself.
      const authorityWith = (config: typeof t.config) =>
        createTokenAuthority({
          db: t.db.db,
          clock: t.clock,
          log: t.app.log,
          redis: undefined,
          config,
          sessionStores: [],
        })
      const authority = authorityWith(t.config)
      const fallback = authorityWith({
        ...t.config,
        DATA_DIR: path.join(fileURLToPath(import.meta.url), 'data'),
      })
      const loadedBy = (by: string) =>
        t.logs.filter((l) => l.includes('revocations loaded') && l.includes(by))
      try {
        await authority.revocations.start()
        for (const e of [entries[0]!, entries[REVOCATION_PAGE]!, entries.at(-1)!])
          assert.equal(await authority.revocations.isRevoked(e.jti), true, e.jti)
        assert.equal(await authority.revocations.isRevoked('paged-never'), false)
        // More than a page: read by a child process, whose arrays this process then holds.
        await until('loaded by a child process', () => loadedBy('child process').length === 1)
        const before = loadedBy('this process').length
        await fallback.revocations.start()
        await until('the fallback read in this process', () => loadedBy('this process').length === before + 1)
        assert.equal(
          t.logs.filter((l) => l.includes('could not load the revocations in a child process')).length,
          1,
        )
        // With the rows gone from the database, only each one's memory still knows them.
        await t.db.db.deleteFrom('revoked_tokens').where('jti', 'like', 'paged-%').execute()
        for (const a of [authority, fallback]) {
          for (const e of entries) assert.equal(await a.revocations.isRevoked(e.jti), true, e.jti)
          assert.equal(await a.revocations.isRevoked('paged-never'), false)
        }
      } finally {
        authority.stop()
        fallback.stop()
      }
    })
  },
)

const redisBackend = backends.find((b) => b.name.includes('redis'))!

test(
  'a Redis copy marked complete is not rewritten: of two instances starting on it, one copies',
  redisBackend.skip ? { skip: redisBackend.skip } : {},
  async () => {
    await withTwoInstances(redisBackend, {}, async (a, b) => {
      const copies = () =>
        [...a.logs, ...b.logs].filter((l) => l.includes('revocations copied into redis')).length
      await until('the copy', () => copies() === 1)
      await a.seed(STANDARD_SEED)
      const key = await revokedApiKey(a)
      assert.equal((await verifyToken(b, key)).valid, false, 'the other instance refuses the key')
      assert.equal(copies(), 1, 'once for the fleet')
    })
  },
)

test(
  "a refresh token rotated on one instance is refused by the other's verify within the revocation time",
  redisBackend.skip ? { skip: redisBackend.skip } : {},
  async () => {
    await withTwoInstances(redisBackend, {}, async (a, b) => {
      await a.seed(STANDARD_SEED)
      const pair = await login(a, 'ev1@example.com')
      // b remembers the token as good.
      assert.equal((await verifyToken(b, pair.refresh_token)).valid, true)
      assert.equal((await verifyToken(b, pair.refresh_token)).valid, true)
      assert.equal((await refresh(a, pair.refresh_token)).statusCode, 200)
      assert.equal((await verifyToken(a, pair.refresh_token)).valid, false, 'the rotating instance: at once')
      assert.equal((await refresh(b, pair.refresh_token)).statusCode, 401, 'refresh on b: at once (reuse)')
      await until('b refuses it at verify', async () => !(await verifyToken(b, pair.refresh_token)).valid)
    })
  },
)
