import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'
import {
  forEachBackend,
  login,
  logout,
  type TestApp,
  verifyToken,
  withStandardSeed,
} from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

const DEV_TYPES = ['POS', 'REPORT', 'FASTPASS', 'KIDS', 'DISPATCH'] as const
const MODES = [0, 1, 2, 3, 4, 5, 6] as const
/** docs/specification.md, written out as the table reads. */
const ALLOWED: Record<(typeof DEV_TYPES)[number], (mode: number) => boolean> = {
  POS: (m) => ![3, 4, 5, 6].includes(m),
  REPORT: (m) => m === 3,
  FASTPASS: (m) => m === 4,
  KIDS: (m) => m === 5,
  DISPATCH: (m) => m === 6,
}

const modeUser = (mode: number) => `mode${mode}@example.com`

forEachBackend(httpBackends, 'POST /devices/operator-token', (ctx) => {
  let t: TestApp
  let ids: Record<string, number>
  before(async () => {
    t = ctx()
    const seeded = await t.seed(
      withStandardSeed({
        operators: [
          ...MODES.map((mode) => ({ email: modeUser(mode), password: 's3cret-pass', event_id: 1, mode })),
          { email: 'nobind@example.com', password: 's3cret-pass', event_id: null, mode: 0 },
          { email: 'logout@example.com', password: 's3cret-pass', event_id: 2, mode: 0 },
          { email: 'race@example.com', password: 's3cret-pass', event_id: 1, mode: 0 },
        ],
      }),
    )
    ids = Object.fromEntries(seeded.operators!.map((o) => [o.email, o.id!]))
  })

  const operatorToken = (payload: Record<string, unknown>, headers: Record<string, string> = {}) =>
    t.request({ method: 'POST', url: '/devices/operator-token', payload, headers })
  const body = (email: string, dev_type: string, extra: Record<string, unknown> = {}) => ({
    email,
    password: 's3cret-pass',
    dev_type,
    dev_mac: 'AA:BB:CC:DD:EE:01',
    ...extra,
  })

  describe('dev_type × mode matrix', () => {
    for (const devType of DEV_TYPES) {
      for (const mode of MODES) {
        const allowed = ALLOWED[devType](mode)
        test(`${devType} with mode ${mode}: ${allowed ? '200' : '401'}`, async () => {
          const res = await operatorToken(body(modeUser(mode), devType))
          assert.equal(res.statusCode, allowed ? 200 : 401)
          if (allowed) {
            assert.equal(res.json().mode, mode)
            assert.equal(res.json().dev_type, devType)
          } else {
            assert.equal(res.headers['www-authenticate'], 'Bearer')
          }
        })
      }
    }
  })

  test('the answer carries the user, its own event, the mode and a prefixed session token', async () => {
    const res = await operatorToken(body('op2@example.com', 'POS'))
    assert.equal(res.statusCode, 200)
    const b = res.json()
    assert.equal(b.user_id, ids['op2@example.com'])
    assert.equal(b.event_id, 2, 'the event comes from the user record')
    assert.equal(b.email, 'op2@example.com')
    assert.equal(b.mode, 0)
    assert.equal(b.dev_type, 'POS')
    assert.match(b.token, /^wbs_[A-Za-z0-9_-]{43}$/)
    const unbound = await operatorToken(body('nobind@example.com', 'POS'))
    assert.equal(unbound.json().event_id, null)
  })

  test('the same token comes back on every call until logout', async () => {
    const first = (await operatorToken(body('op@example.com', 'POS'))).json().token
    const second = (await operatorToken(body('OP@example.com', 'POS', { dev_mac: 'other-device' }))).json()
      .token
    assert.equal(first, second)
  })

  test('POST /tokens/verify knows session tokens: type session, the operator and its permissions', async () => {
    const token = (await operatorToken(body('op@example.com', 'POS'))).json().token
    const { valid, claims } = await verifyToken(t, token)
    assert.equal(valid, true)
    assert.equal(claims.type, 'session')
    assert.equal(claims.role, 'operator')
    assert.equal(claims.sub, String(ids['op@example.com']))
    assert.deepEqual(claims.event_ids, [1])
    assert.deepEqual(claims.permissions, { '1': ['pos:sell', 'ticket:scan'] })
    assert.equal(claims.mode, 0)
    assert.ok(claims.exp > claims.iat)
    assert.deepEqual(await verifyToken(t, `wbs_${'A'.repeat(43)}`), { valid: false, claims: null })
  })

  test("the operator's logout clears its session token; the next call issues a new one", async () => {
    const old = (await operatorToken(body('logout@example.com', 'POS'))).json().token
    const other = (await operatorToken(body('op2@example.com', 'POS'))).json().token
    const pair = await login(t, 'logout@example.com', 'operator')
    const out = await logout(t, pair.access_token, pair.refresh_token)
    assert.equal(out.statusCode, 200)
    assert.deepEqual(await verifyToken(t, old), { valid: false, claims: null })
    const fresh = (await operatorToken(body('logout@example.com', 'POS'))).json().token
    assert.notEqual(fresh, old)
    assert.equal((await verifyToken(t, fresh)).valid, true)
    assert.equal((await verifyToken(t, other)).valid, true, "another operator's session is untouched")
  })

  test('only a hash and a sealed copy are stored, never the token', async () => {
    const token = (await operatorToken(body('op@example.com', 'POS'))).json().token
    const row = await t.db.db
      .selectFrom('operator_sessions')
      .selectAll()
      .where('user_id', '=', ids['op@example.com']!)
      .executeTakeFirstOrThrow()
    assert.ok(!JSON.stringify(row).includes(token.slice(4)))
  })

  test('a sealed token copied to another operator does not open there', async () => {
    const mine = (await operatorToken(body('mode1@example.com', 'POS'))).json().token
    const row = await t.db.db
      .selectFrom('operator_sessions')
      .select('token_sealed')
      .where('user_id', '=', ids['mode1@example.com']!)
      .executeTakeFirstOrThrow()
    await t.db.db
      .updateTable('operator_sessions')
      .set({ token_sealed: row.token_sealed })
      .where('user_id', '=', ids['mode2@example.com']!)
      .execute()
    const theirs = (await operatorToken(body('mode2@example.com', 'POS'))).json().token
    assert.notEqual(theirs, mine)
  })

  test('of concurrent first calls all get the same token', async () => {
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => operatorToken(body('race@example.com', 'POS'))),
    )
    for (const r of answers) assert.equal(r.statusCode, 200)
    assert.equal(new Set(answers.map((r) => r.json().token)).size, 1)
  })

  test('wrong password, unknown e-mail and a disallowed combination are the same 401', async () => {
    const answers = await Promise.all([
      operatorToken({ ...body('mode0@example.com', 'POS'), password: 'wrong-password' }),
      operatorToken(body('nobody@example.com', 'POS')),
      operatorToken(body('mode0@example.com', 'REPORT')),
    ])
    for (const r of answers) assert.equal(r.statusCode, 401)
    assert.equal(new Set(answers.map((r) => r.body)).size, 1)
  })

  test('a session token is not a bearer token for protected routes', async () => {
    const token = (await operatorToken(body('op@example.com', 'POS'))).json().token
    const res = await t.request({
      method: 'POST',
      url: '/devices/1/token',
      token,
      payload: { operator_id: 1 },
    })
    assert.equal(res.statusCode, 401)
  })

  test('validation: unknown dev_type, field bounds, unknown property, missing field', async () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [body('op@example.com', 'TABLET'), 'dev_type', 'literal_error'],
      [body('op@example.com', 'pos'), 'dev_type', 'literal_error'],
      [body('a@', 'POS'), 'email', 'string_too_short'],
      [{ ...body('op@example.com', 'POS'), password: '' }, 'password', 'string_too_short'],
      [body('op@example.com', 'POS', { dev_mac: 'x'.repeat(65) }), 'dev_mac', 'string_too_long'],
      [body('op@example.com', 'POS', { event_id: 1 }), 'event_id', 'extra_forbidden'],
      [{ email: 'op@example.com', password: 's3cret-pass', dev_type: 'POS' }, 'dev_mac', 'missing'],
    ]
    for (const [payload, field, type] of cases) {
      const res = await operatorToken(payload)
      assert.equal(res.statusCode, 422, field)
      assert.deepEqual(res.json().detail[0].loc, ['body', field])
      assert.equal(res.json().detail[0].type, type)
    }
  })

  test('the limit is 30 per minute and address', async () => {
    const headers = { 'x-forwarded-for': '198.51.100.90' }
    for (let i = 0; i < 30; i++) assert.equal((await operatorToken({}, headers)).statusCode, 422)
    const limited = await operatorToken({}, headers)
    assert.equal(limited.statusCode, 429)
    assert.equal(limited.json().limit, 30)
  })
})
