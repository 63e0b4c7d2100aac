import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { login, STANDARD_SEED, startApp, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { backends, eachBackend, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { until } from '../../test/helpers/until.js'
import { createApiKey } from './api-keys.store.js'

/**
 * Issue 15, item 4: POST /tokens/verify resolves API keys from a cache of each instance (no database
 * look-up per request), invalidated on revocation through the revocation feed, at most 60 s stale.
 */
eachBackend(backends, `API keys from the instance's cache`, (backend) => {
  let p: ProvisionedBackend
  let a: TestApp
  let b: TestApp
  before(async () => {
    p = await backend.provision()
    a = await startApp(backend, {}, p)
    b = await startApp(backend, {}, p)
    await a.seed(STANDARD_SEED)
  })
  after(async () => {
    await a?.close()
    await b?.close()
    await p?.dispose()
  })

  const newKey = () =>
    createApiKey(a.db.db, {
      event_id: 1,
      name: 'cache',
      scopes: ['api:read'],
      created_by: null,
      now: Date.now(),
    })
  test('revoked through one instance: refused by the other, which had it cached (polled)', async () => {
    const key = await newKey()
    assert.equal((await verifyToken(b, key.plaintext)).valid, true)
    const admin = await login(a, 'root@example.com')
    const res = await a.request({
      method: 'DELETE',
      url: `/tokens/api-key/${key.record.id}`,
      token: admin.access_token,
    })
    assert.equal(res.statusCode, 200)
    assert.equal(
      (await verifyToken(a, key.plaintext)).valid,
      false,
      'the revoking instance refuses it at once',
    )
    await until('the other instance drops the key', async () => !(await verifyToken(b, key.plaintext)).valid)
  })

  test('changed behind the service’s back: answered from the cache, for at most 60 s', async () => {
    const key = await newKey()
    assert.equal((await verifyToken(b, key.plaintext)).valid, true)
    // No revocation-list entry: only the row changes, as a database restore or a manual edit would.
    await a.db.db
      .updateTable('event_clients')
      .set({ revoked_at: Date.now() })
      .where('id', '=', key.record.id)
      .execute()
    assert.equal((await verifyToken(b, key.plaintext)).valid, true, 'a cache hit: the database is not read')
    b.clock.advance(60_000)
    assert.equal((await verifyToken(b, key.plaintext)).valid, false, 'the entry lapsed: the database answers')
  })
})
