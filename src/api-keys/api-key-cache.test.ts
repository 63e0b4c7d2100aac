import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { STANDARD_SEED, startApp, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { backends, eachBackend, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { partnerGet, revokeKeyAsAdmin } from '../../test/helpers/partner.js'
import { metricValue } from '../../test/helpers/scrape.js'
import { until } from '../../test/helpers/until.js'
import { createApiKey } from './api-keys.store.js'

/**
 * One cache of API keys per instance (docs/architecture.md): POST /tokens/verify, verify credentials and
 * the partner API look keys up there (no database look-up per request), a revocation reaches every use
 * through the revocation feed, and a change behind the service's back is seen within 60 s.
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

  const newKey = (scopes = ['api:read']) =>
    createApiKey(a.db.db, {
      event_id: 1,
      name: 'cache',
      scopes,
      created_by: null,
      now: Date.now(),
    })
  test('revoked through one instance: refused by the other, which had it cached (polled)', async () => {
    const key = await newKey()
    assert.equal((await verifyToken(b, key.plaintext)).valid, true)
    await revokeKeyAsAdmin(a, key.record.id)
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

  test('the partner API reads a key once a minute, counted as hits and database reads', async () => {
    const key = await newKey(['api:read', 'tokens:verify'])
    const reads = await metricValue(b, 'wristband_api_key_lookups_total', { result: 'database' })
    const hits = await metricValue(b, 'wristband_api_key_lookups_total', { result: 'hit' })
    for (let i = 0; i < 3; i++)
      assert.equal((await partnerGet(b, '/companies/tickets', key.plaintext)).statusCode, 200)
    // The same key as a verify credential and verified itself: the same cache entry answers.
    const verified = await b.request({
      method: 'POST',
      url: '/tokens/verify',
      headers: { api_key: key.plaintext },
      payload: { token: key.plaintext },
    })
    assert.equal(verified.json().valid, true)
    assert.equal(
      await metricValue(b, 'wristband_api_key_lookups_total', { result: 'database' }),
      reads + 1,
      'one database read for every use of the key within the minute',
    )
    const hitsAfter = await metricValue(b, 'wristband_api_key_lookups_total', { result: 'hit' })
    assert.ok(hitsAfter >= hits + 3, `hits ${hits} -> ${hitsAfter}`)
  })

  test('revoked through one instance: the other instance’s partner API refuses it (polled)', async () => {
    const key = await newKey()
    assert.equal((await partnerGet(b, '/companies/tickets', key.plaintext)).statusCode, 200)
    await revokeKeyAsAdmin(a, key.record.id)
    await until(
      'the other instance refuses the key',
      async () => (await partnerGet(b, '/companies/tickets', key.plaintext)).statusCode === 401,
    )
  })
})
