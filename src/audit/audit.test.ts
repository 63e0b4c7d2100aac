import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { generateSync } from 'otplib'
import { login, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { assertPerMinuteLimit } from '../../test/helpers/rate-limit.js'
import { type SmtpSink, startAppWithMail } from '../../test/helpers/smtp-sink.js'
import { until } from '../../test/helpers/until.js'

interface Entry {
  id: number
  at: string
  kind: string
  actor: string | null
  ip: string | null
  outcome: string
  detail: Record<string, unknown> | null
}

const CLIENT = '203.0.113.7'

eachBackend(httpBackends, 'audit trail and GET /admin/audit', (backend) => {
  let t: TestApp
  let sink: SmtpSink
  let close = async () => {}
  let root: string
  let adminId: number
  /** Every secret the scenario handles; none may appear in the audit log. */
  const secrets: string[] = []

  const as = (headers: Record<string, string> = {}) => ({ 'x-forwarded-for': CLIENT, ...headers })
  const audit = (query: string, token = root) =>
    t.request({ method: 'GET', url: `/admin/audit?${query}`, token })
  const entries = async (query: string): Promise<Entry[]> => {
    const res = await audit(query)
    assert.equal(res.statusCode, 200, res.body)
    return res.json().items
  }

  before(async () => {
    ;({ t, sink, close } = await startAppWithMail(backend))
    const seeded = await t.seed(STANDARD_SEED)
    adminId = seeded.administrators!.find((a) => a.email === 'ev1@example.com')!.id!
    root = (await login(t, 'root@example.com')).access_token

    // A scenario that passes through every security event, from one client address.
    const bad = await t.request({
      method: 'POST',
      url: '/auth/login',
      headers: as(),
      payload: { email: 'ev1@example.com', password: 'wrong-password' },
    })
    assert.equal(bad.statusCode, 401)
    const ok = await t.request({
      method: 'POST',
      url: '/auth/login',
      headers: as(),
      payload: { email: 'ev1@example.com', password: 's3cret-pass' },
    })
    const pair = ok.json()
    secrets.push('wrong-password', 's3cret-pass', pair.access_token, pair.refresh_token)

    const rotated = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: pair.refresh_token },
    })
    secrets.push(rotated.json().refresh_token)
    const reuse = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      headers: as(),
      payload: { refresh_token: pair.refresh_token },
    })
    assert.equal(reuse.statusCode, 401)

    const setup = await t.request({ method: 'POST', url: '/admin/mfa/setup', token: pair.access_token })
    const { secret, qr_uri } = setup.json()
    secrets.push(secret, qr_uri)
    t.clock.advance(30_000 - (t.clock.now() % 30_000) + 100)
    const code = generateSync({ secret, epoch: Math.floor(t.clock.now() / 1000) })
    const verified = await t.request({
      method: 'POST',
      url: '/admin/mfa/verify',
      token: pair.access_token,
      headers: as(),
      payload: { code },
    })
    assert.equal(verified.statusCode, 200, verified.body)
    secrets.push(verified.json().access_token)

    await t.request({
      method: 'POST',
      url: '/admin/password-reset/email-send',
      headers: as(),
      payload: { email: 'ev1@example.com' },
    })
    const mail = await sink.waitFor('ev1@example.com', /Reset your wristband password/)
    const token = /password-reset\/([A-Za-z0-9_-]+)/.exec(mail.text ?? '')![1]!
    secrets.push(token)
    const reset = await t.request({
      method: 'POST',
      url: `/admin/password-reset/${token}`,
      headers: as(),
      payload: { new_password: 'the-new-password' },
    })
    assert.equal(reset.statusCode, 200)
    secrets.push('the-new-password')

    const key = await t.request({
      method: 'POST',
      url: '/tokens/api-key',
      token: root,
      headers: as(),
      payload: { event_id: 1, name: 'Gate', scopes: ['api:read'] },
    })
    secrets.push(key.json().api_key)
    await t.request({
      method: 'DELETE',
      url: `/tokens/api-key/${key.json().id}`,
      token: root,
      headers: as(),
    })

    const statuses: number[] = []
    for (let i = 0; i < 6; i++) {
      const res = await t.request({
        method: 'POST',
        url: '/admin/password-reset/email-send',
        headers: as({ 'x-forwarded-for': '198.51.100.9' }),
        // A new address each time: the hourly quota per address would answer 429 from the 4th.
        payload: { email: `nobody${i}@example.com` },
      })
      statuses.push(res.statusCode)
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429])
    // The rate limiter writes its record without holding up the 429.
    await until('the rate_limit_hit record', async () => {
      const hit = await t.db.db
        .selectFrom('audit_log')
        .select('id')
        .where('kind', '=', 'rate_limit_hit')
        .executeTakeFirst()
      return hit !== undefined
    })
  })
  after(async () => close())

  test('every security event of the scenario is recorded with time, actor, address and outcome', async () => {
    const actor = `admin:${adminId}`
    const expect = [
      { kind: 'login', actor: 'admin:ev1@example.com', outcome: 'failure' },
      { kind: 'login', actor, outcome: 'success' },
      { kind: 'refresh_reuse_detected', actor, outcome: 'denied' },
      { kind: 'mfa_enabled', actor, outcome: 'success' },
      { kind: 'password_reset_requested', actor, outcome: 'success' },
      { kind: 'password_reset_completed', actor, outcome: 'success' },
      { kind: 'api_key_created', actor: null, outcome: 'success' },
      { kind: 'api_key_revoked', actor: null, outcome: 'success' },
    ]
    const all = await entries('limit=200')
    for (const e of expect) {
      const found = all.find(
        (a) => a.kind === e.kind && a.outcome === e.outcome && (e.actor === null || a.actor === e.actor),
      )
      assert.ok(found, `no ${e.kind}/${e.outcome} record for ${e.actor}`)
      assert.equal(found.ip, CLIENT, `${e.kind} address`)
      assert.ok(Math.abs(Date.parse(found.at) - t.clock.now()) < 3600_000, `${e.kind} time`)
    }
    const created = all.find((a) => a.kind === 'api_key_created')!
    assert.match(created.actor ?? '', /^admin:\d+$/)
    assert.deepEqual(created.detail?.scopes, ['api:read'])
    const limited = all.find((a) => a.kind === 'rate_limit_hit')
    assert.ok(limited, 'no rate_limit_hit record')
    assert.equal(limited.ip, '198.51.100.9')
    assert.equal(limited.detail?.route, '/admin/password-reset/email-send')
  })

  test('no secret appears in any record', async () => {
    const rows = await t.db.db.selectFrom('audit_log').selectAll().execute()
    const dump = JSON.stringify(rows)
    assert.ok(rows.length >= 9)
    for (const s of secrets) assert.ok(!dump.includes(s), `a secret is in the audit log: ${s.slice(0, 12)}…`)
  })

  test('filters by kind, actor and outcome', async () => {
    const logins = await entries('kind=login')
    assert.ok(logins.length >= 2)
    assert.ok(logins.every((e) => e.kind === 'login'))
    const mine = await entries(`actor=${encodeURIComponent(`admin:${adminId}`)}`)
    assert.ok(mine.length >= 5)
    assert.ok(mine.every((e) => e.actor === `admin:${adminId}`))
    const failed = await entries('kind=login&outcome=failure')
    assert.ok(failed.length >= 1 && failed.every((e) => e.kind === 'login' && e.outcome === 'failure'))
    assert.deepEqual(await entries('kind=no_such_kind'), [])
  })

  test('pages newest first with before/next_before, covering every record once', async () => {
    const total = await t.db.db
      .selectFrom('audit_log')
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow()
    const seen: number[] = []
    let before: number | null = null
    do {
      const res = await audit(`limit=3${before === null ? '' : `&before=${before}`}`)
      assert.equal(res.statusCode, 200)
      const page = res.json()
      assert.ok(page.items.length <= 3)
      seen.push(...page.items.map((e: Entry) => e.id))
      before = page.next_before
    } while (before !== null)
    // Reading the log writes nothing to it, so the pages add up to the table.
    assert.equal(seen.length, Number(total.n))
    assert.deepEqual(
      seen,
      [...seen].sort((a, b) => b - a),
    )
    assert.equal(new Set(seen).size, seen.length)
  })

  test('superadmins only: 403 for an event administrator and an operator, 401 without a token', async () => {
    const ev1 = (await login(t, 'ev1@example.com', 'admin', 'the-new-password')).access_token
    assert.equal((await audit('', ev1)).statusCode, 403)
    const op = (await login(t, 'op@example.com', 'operator')).access_token
    assert.equal((await audit('', op)).statusCode, 403)
    assert.equal((await t.request({ method: 'GET', url: '/admin/audit' })).statusCode, 401)
  })

  test('bad paging or filter values are 422', async () => {
    for (const q of ['limit=0', 'limit=201', 'before=abc', 'outcome=maybe']) {
      const res = await audit(q)
      assert.equal(res.statusCode, 422, q)
      assert.equal(res.json().detail[0].loc[0], 'query')
    }
  })

  test('rate limit: 60 per minute per address', async () => {
    await assertPerMinuteLimit(t, 60, () => ({ method: 'GET', url: '/admin/audit?limit=1', token: root }))
  })
})
