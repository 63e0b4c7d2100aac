import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { dashboardSession, postSignIn } from '../../test/helpers/dashboard.js'
import { parseSeed } from '../seed/seed.js'

forEachBackend(httpBackends, 'dashboard users managed by a superadmin', (ctx) => {
  let t: TestApp
  let root: string
  let admin: string
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
    root = (await login(t, 'root@example.com')).access_token
    admin = (await login(t, 'ev1@example.com')).access_token
  })

  const create = (payload: Record<string, unknown>, token = root) =>
    t.request({ method: 'POST', url: '/admin/dashboard-users', token, payload })
  const events = (session: string) =>
    t.request({ method: 'GET', url: '/dashboard', cookies: { wb_session: session } })

  test('a superadmin creates a dashboard user who then signs in and sees only their events', async () => {
    const res = await create({ username: 'box-office', password: 'long-enough-1', event_ids: [2] })
    assert.equal(res.statusCode, 201, res.body)
    const body = res.json()
    assert.equal(body.username, 'box-office')
    assert.deepEqual(body.event_ids, [2])
    assert.equal('password' in body || 'password_hash' in body, false)
    const page = await events(await dashboardSession(t, 'box-office', 'long-enough-1'))
    assert.match(page.body, /Winter Fest/)
    assert.doesNotMatch(page.body, /Summer Fest/)
    const list = await t.request({ method: 'GET', url: '/admin/dashboard-users', token: root })
    assert.ok(list.json().some((u: { username: string }) => u.username === 'box-office'))
  })

  test('refusals: no token 401, bad body 422, an event administrator 403, unknown event 404, taken name 409', async () => {
    const valid = { username: 'refused', password: 'long-enough-1', event_ids: [1] }
    assert.equal(
      (await t.request({ method: 'POST', url: '/admin/dashboard-users', payload: valid })).statusCode,
      401,
    )
    assert.equal((await create({ ...valid, password: 'short' })).statusCode, 422)
    assert.equal((await create({ ...valid, extra: 1 })).statusCode, 422)
    assert.equal((await create(valid, admin)).statusCode, 403)
    assert.equal(
      (await t.request({ method: 'GET', url: '/admin/dashboard-users', token: admin })).statusCode,
      403,
    )
    assert.equal((await create({ ...valid, event_ids: [1, 999] })).statusCode, 404)
    assert.equal((await create(valid)).statusCode, 201)
    const taken = await create(valid)
    assert.equal(taken.statusCode, 409)
    assert.equal(taken.json().error, 'username_taken')
  })

  test('a new password ends open sessions; new event ids apply at once', async () => {
    const id = (await create({ username: 'changing', password: 'first-password', event_ids: [1] })).json().id
    const session = await dashboardSession(t, 'changing', 'first-password')
    const narrowed = await t.request({
      method: 'PATCH',
      url: `/admin/dashboard-users/${id}`,
      token: root,
      payload: { event_ids: [2] },
    })
    assert.equal(narrowed.statusCode, 200)
    assert.deepEqual(narrowed.json().event_ids, [2])
    const page = await events(session)
    assert.equal(page.statusCode, 200)
    assert.match(page.body, /Winter Fest/)
    assert.doesNotMatch(page.body, /Summer Fest/)

    const changed = await t.request({
      method: 'PATCH',
      url: `/admin/dashboard-users/${id}`,
      token: root,
      payload: { password: 'second-password' },
    })
    assert.equal(changed.statusCode, 200)
    assert.equal((await events(session)).statusCode, 303)
    assert.equal((await postSignIn(t, 'changing', 'first-password')).statusCode, 401)
    assert.equal((await postSignIn(t, 'changing', 'second-password')).statusCode, 303)
  })

  test('a dashboard user is bound to a partner by name: POST, GET, PATCH, and PATCH null unbinds', async () => {
    const partnerOf = async (id: number) =>
      (await t.request({ method: 'GET', url: '/admin/dashboard-users', token: root }))
        .json()
        .find((u: { id: number }) => u.id === id).partner
    const plain = await create({ username: 'no-partner', password: 'long-enough-1', event_ids: [1] })
    assert.equal(plain.json().partner, null)
    const res = await create({
      username: 'acme-office',
      password: 'long-enough-1',
      event_ids: [1],
      partner: 'Acme',
    })
    assert.equal(res.statusCode, 201, res.body)
    const id = res.json().id
    assert.equal(res.json().partner, 'Acme')
    assert.equal(await partnerOf(id), 'Acme')
    const patch = (payload: Record<string, unknown>) =>
      t.request({ method: 'PATCH', url: `/admin/dashboard-users/${id}`, token: root, payload })
    assert.equal((await patch({ partner: 'Rival' })).json().partner, 'Rival')
    // Another change leaves the partner as it is.
    assert.equal((await patch({ event_ids: [1, 2] })).json().partner, 'Rival')
    const unbound = await patch({ partner: null })
    assert.equal(unbound.statusCode, 200)
    assert.equal(unbound.json().partner, null)
    assert.equal(await partnerOf(id), null)
    for (const partner of ['', 'x'.repeat(101), 7]) assert.equal((await patch({ partner })).statusCode, 422)
    const audit = await t.db.db
      .selectFrom('audit_log')
      .select('detail')
      .where('kind', '=', 'dashboard_user_updated')
      .orderBy('id', 'desc')
      .executeTakeFirstOrThrow()
    assert.equal(JSON.parse(String(audit.detail)).partner, null)
  })

  test('the seed file binds a dashboard user; leaving partner out keeps it, null unbinds', async () => {
    const user = (partner?: string | null) => ({
      username: 'seeded-partner',
      password: 'long-enough-1',
      event_ids: [1],
      ...(partner !== undefined ? { partner } : {}),
    })
    const partnerOf = async () =>
      (await t.request({ method: 'GET', url: '/admin/dashboard-users', token: root }))
        .json()
        .find((u: { username: string }) => u.username === 'seeded-partner').partner
    await t.seed({ dashboard_users: [user('Acme')] })
    assert.equal(await partnerOf(), 'Acme')
    await t.seed({ dashboard_users: [user()] })
    assert.equal(await partnerOf(), 'Acme')
    await t.seed({ dashboard_users: [user(null)] })
    assert.equal(await partnerOf(), null)
    // What `wristband seed` checks a file with.
    assert.deepEqual(parseSeed({ dashboard_users: [user('Acme')] }).dashboard_users![0]!.partner, 'Acme')
    assert.throws(() => parseSeed({ dashboard_users: [user('')] }), /dashboard_users\/0\/partner/)
  })

  test('removing a dashboard user ends their sessions', async () => {
    const id = (await create({ username: 'leaving', password: 'long-enough-1', event_ids: [1] })).json().id
    const session = await dashboardSession(t, 'leaving', 'long-enough-1')
    const res = await t.request({ method: 'DELETE', url: `/admin/dashboard-users/${id}`, token: root })
    assert.equal(res.statusCode, 200)
    assert.equal((await events(session)).statusCode, 303)
    const rows = await t.db.db
      .selectFrom('dashboard_sessions')
      .select('token_hash')
      .where('subject_kind', '=', 'dashboard_user')
      .where('subject_id', '=', id)
      .execute()
    assert.deepEqual(rows, [])
    assert.equal((await postSignIn(t, 'leaving', 'long-enough-1')).statusCode, 401)
    assert.equal(
      (await t.request({ method: 'DELETE', url: `/admin/dashboard-users/${id}`, token: root })).statusCode,
      404,
    )
  })
})
