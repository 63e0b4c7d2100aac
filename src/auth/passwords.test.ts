import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { hash as argon2Hash } from '@node-rs/argon2'
import { hash as bcryptHash } from '@node-rs/bcrypt'
import { forEachBackend, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

const PASSWORD = 'legacy-pass-123'
const OWASP_ARGON2ID = /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/

forEachBackend(httpBackends, 'password hashes', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed({
      events: STANDARD_SEED.events,
      administrators: [
        { email: 'legacy@example.com', password: 'placeholder', role: 'admin', event_ids: [1] },
        { email: 'weak@example.com', password: 'placeholder', role: 'admin', event_ids: [1] },
      ],
      operators: [{ email: 'legacy-op@example.com', password: 'placeholder', event_id: 1, mode: 0 }],
    })
  })

  const storedHash = async (table: 'administrators' | 'users', email: string) =>
    (
      await t.db.db
        .selectFrom(table)
        .select('password_hash')
        .where('email', '=', email)
        .executeTakeFirstOrThrow()
    ).password_hash
  const setHash = (table: 'administrators' | 'users', email: string, password_hash: string) =>
    t.db.db.updateTable(table).set({ password_hash }).where('email', '=', email).execute()
  const signIn = (email: string, password: string, role: 'admin' | 'operator' = 'admin') =>
    t.request({ method: 'POST', url: '/auth/login', payload: { email, password, role } })

  test('new hashes are argon2id with the OWASP parameters', async () => {
    assert.match(await storedHash('administrators', 'legacy@example.com'), OWASP_ARGON2ID)
  })

  test('a bcrypt hash verifies at login and is replaced by argon2id', async () => {
    const legacy = await bcryptHash(PASSWORD, 8)
    await setHash('administrators', 'legacy@example.com', legacy)

    assert.equal((await signIn('legacy@example.com', 'wrong-password')).statusCode, 401)
    assert.equal(await storedHash('administrators', 'legacy@example.com'), legacy, 'no rehash on failure')

    assert.equal((await signIn('legacy@example.com', PASSWORD)).statusCode, 200)
    const upgraded = await storedHash('administrators', 'legacy@example.com')
    assert.match(upgraded, OWASP_ARGON2ID)
    assert.equal((await signIn('legacy@example.com', PASSWORD)).statusCode, 200, 'the new hash verifies')
    assert.equal(await storedHash('administrators', 'legacy@example.com'), upgraded, 'rehashed once')
  })

  test('an operator’s bcrypt hash is upgraded in the operators table', async () => {
    await setHash('users', 'legacy-op@example.com', await bcryptHash(PASSWORD, 8))
    assert.equal((await signIn('legacy-op@example.com', PASSWORD, 'operator')).statusCode, 200)
    assert.match(await storedHash('users', 'legacy-op@example.com'), OWASP_ARGON2ID)
  })

  test('an argon2 hash with weaker parameters is upgraded too', async () => {
    await setHash(
      'administrators',
      'weak@example.com',
      await argon2Hash(PASSWORD, { algorithm: 2, memoryCost: 4096, timeCost: 1, parallelism: 1 }),
    )
    assert.equal((await signIn('weak@example.com', PASSWORD)).statusCode, 200)
    assert.match(await storedHash('administrators', 'weak@example.com'), OWASP_ARGON2ID)
  })
})
