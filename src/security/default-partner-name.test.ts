import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

/**
 * Third audit (docs/security.md): "a partner created without a name gets a default name that contains
 * seven characters of its key". Partner names are shown to dashboard users, in key listings and logs;
 * a key's partner of its own is now named after the key's name and id, nothing of the key.
 */
forEachBackend(httpBackends, 'the default partner name', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
  })

  test('a partner created without a name gets a default name that contains seven characters of its key: now none', async () => {
    const admin = (await login(t, 'ev1@example.com')).access_token
    const res = await t.request({
      method: 'POST',
      url: '/tokens/api-key',
      token: admin,
      payload: { event_id: 1, name: 'Box office', scopes: ['api:read'] },
    })
    assert.equal(res.statusCode, 200, res.body)
    const { api_key, partner, id } = res.json()
    assert.equal(partner, `Box office (key #${id})`)
    const secret = api_key.slice('wb_'.length)
    for (let i = 0; i + 4 <= secret.length; i++)
      assert.ok(
        !partner.includes(secret.slice(i, i + 4)),
        'no four characters of the key in its partner name',
      )
    // The listing, and the partner a first request uses, say the same name.
    const list = await t.request({ method: 'GET', url: '/tokens/api-keys?event_id=1', token: admin })
    assert.equal(list.json().find((k: { id: number }) => k.id === id).partner, partner)
    const rows = await t.db.db.selectFrom('partners').select('name').where('event_id', '=', 1).execute()
    assert.ok(rows.every((r) => !r.name.includes(secret.slice(0, 7))))
  })
})
