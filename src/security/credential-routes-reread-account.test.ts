import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { eventAdmin, forEachBackend, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

/**
 * Audit of 2026-11-23, item 6: a disabled administrator's access token (valid up to 15 minutes)
 * could still create an API key (which never expires) and dashboard users. Every route that creates
 * a credential now re-reads the stored account and its grant, as /tokens/offline does: a disabled
 * account is 401, a grant narrowed since the token was issued is applied at once (403).
 */
const ADMINS = {
  leaver: 'leaver@example.com',
  rootLeaver: 'root-leaver@example.com',
  narrowed: 'narrowed@example.com',
  demoted: 'demoted@example.com',
}

forEachBackend(httpBackends, 'credential-creating routes re-read the account (audit item 6)', (ctx) => {
  let t: TestApp
  /** Access tokens issued while every account was enabled and fully granted. */
  const tokens: Record<keyof typeof ADMINS, string> = {
    leaver: '',
    rootLeaver: '',
    narrowed: '',
    demoted: '',
  }
  let deviceId = 0
  let operatorId = 0
  let dashboardUserId = 0

  const admins = () => t.db.db.updateTable('administrators')
  const apiKey = (token: string) =>
    t.request({
      method: 'POST',
      url: '/tokens/api-key',
      token,
      payload: { event_id: 1, name: 'never-expires', scopes: ['api:read', 'api:write'] },
    })
  const dashboardUser = (token: string, username: string) =>
    t.request({
      method: 'POST',
      url: '/admin/dashboard-users',
      token,
      payload: { username, password: 'long-enough-1', event_ids: [1] },
    })
  const dashboardPassword = (token: string) =>
    t.request({
      method: 'PATCH',
      url: `/admin/dashboard-users/${dashboardUserId}`,
      token,
      payload: { password: 'taken-over-1' },
    })
  const deviceToken = (token: string) =>
    t.request({
      method: 'POST',
      url: `/devices/${deviceId}/token`,
      token,
      payload: { operator_id: operatorId },
    })
  const offlineToken = (token: string) =>
    t.request({ method: 'POST', url: '/tokens/offline', token, payload: { event_id: 1 } })
  const keysNamed = async (name: string) =>
    (await t.db.db.selectFrom('event_clients').select('id').where('name', '=', name).execute()).length

  before(async () => {
    t = ctx()
    const seeded = await t.seed({
      ...withStandardSeed({
        administrators: [
          eventAdmin(ADMINS.leaver),
          { email: ADMINS.rootLeaver, password: 's3cret-pass', role: 'superadmin', event_ids: [] },
          eventAdmin(ADMINS.narrowed, [1, 2]),
          { email: ADMINS.demoted, password: 's3cret-pass', role: 'superadmin', event_ids: [] },
        ],
      }),
      dashboard_users: [{ username: 'partner-target', password: 's3cret-pass', event_ids: [1] }],
    })
    deviceId = seeded.devices![0]!.id!
    operatorId = seeded.operators!.find((o) => o.email === 'op@example.com')!.id!
    dashboardUserId = seeded.dashboard_users!.find((u) => u.username === 'partner-target')!.id!
    for (const [k, email] of Object.entries(ADMINS))
      tokens[k as keyof typeof ADMINS] = (await login(t, email)).access_token
    // After the tokens were issued: two accounts disabled, one narrowed to event 2, one demoted.
    await admins().set({ disabled: 1 }).where('email', 'in', [ADMINS.leaver, ADMINS.rootLeaver]).execute()
    await admins().set({ event_ids: '2' }).where('email', '=', ADMINS.narrowed).execute()
    await admins().set({ role: 'admin', event_ids: '1' }).where('email', '=', ADMINS.demoted).execute()
  })

  test('a disabled administrator cannot create an API key, a device token or an offline token', async () => {
    const res = await apiKey(tokens.leaver)
    assert.equal(res.statusCode, 401, res.body)
    assert.equal(await keysNamed('never-expires'), 0, 'an API key was stored')
    assert.equal((await deviceToken(tokens.leaver)).statusCode, 401)
    assert.equal((await offlineToken(tokens.leaver)).statusCode, 401)
  })

  test('a disabled superadmin cannot create a dashboard user or set its password', async () => {
    const res = await dashboardUser(tokens.rootLeaver, 'planted')
    assert.equal(res.statusCode, 401, res.body)
    const planted = await t.db.db
      .selectFrom('dashboard_users')
      .select('id')
      .where('username', '=', 'planted')
      .execute()
    assert.deepEqual(planted, [])
    assert.equal((await dashboardPassword(tokens.rootLeaver)).statusCode, 401)
  })

  test('a grant narrowed after the token was issued applies at once', async () => {
    const res = await apiKey(tokens.narrowed)
    assert.equal(res.statusCode, 403, res.body)
    assert.equal((await deviceToken(tokens.narrowed)).statusCode, 403)
    assert.equal((await dashboardUser(tokens.demoted, 'planted-2')).statusCode, 403)
    assert.equal((await dashboardPassword(tokens.demoted)).statusCode, 403)
    assert.equal(await keysNamed('never-expires'), 0)
  })

  test('an enabled administrator still creates them (the same requests work)', async () => {
    const root = (await login(t, 'root@example.com')).access_token
    const ev1 = (await login(t, 'ev1@example.com')).access_token
    assert.equal((await apiKey(ev1)).statusCode, 200)
    assert.equal((await deviceToken(ev1)).statusCode, 200)
    assert.equal((await dashboardUser(root, 'legit-partner')).statusCode, 201)
    assert.equal((await dashboardPassword(root)).statusCode, 200)
  })
})
