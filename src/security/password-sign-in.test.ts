import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { hash as bcryptHash } from '@node-rs/bcrypt'
import { sql } from 'kysely'
import { eventAdmin, forEachBackend, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { postSignIn } from '../../test/helpers/dashboard.js'
import { metricValue } from '../../test/helpers/scrape.js'
import { BACKOFF_POLICY } from '../platform/backoff.js'

/**
 * The four copies of the password sign-in (`/auth/login`, consumers, operator tokens,
 * the dashboard) had drifted. They are one `signInWithPassword` now; each test here is one drift, shown
 * through HTTP. The work of a sign-in is read from `wristband_password_checks_total` (hashes checked),
 * never from a stopwatch: equal work is what makes equal time.
 */
const PASSWORD = 's3cret-pass'
const LEGACY = 'legacy-pass-123'
const OWASP_ARGON2ID = /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/

forEachBackend(httpBackends, 'one password sign-in', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed({
      ...withStandardSeed({
        // "twin@example.com" names three accounts, "pair@example.com" two, "solo-partner" one.
        administrators: [
          eventAdmin('twin@example.com'),
          eventAdmin('pair@example.com'),
          eventAdmin('legacy-admin@example.com'),
        ],
        network_managers: [
          { email: 'twin@example.com', password: 'manager-pass', event_ids: [1] },
          { email: 'pair@example.com', password: 'manager-pass', event_ids: [1] },
          { email: 'legacy-nm@example.com', password: PASSWORD, event_ids: [1] },
        ],
        dashboard_users: [
          { username: 'twin@example.com', password: 'partner-pass', event_ids: [1] },
          { username: 'solo-partner', password: PASSWORD, event_ids: [1] },
          { username: 'solo-mail@example.com', password: PASSWORD, event_ids: [1] },
          { username: 'legacy-partner', password: PASSWORD, event_ids: [1] },
        ],
        operators: [
          { email: 'gate-mode0@example.com', password: PASSWORD, event_id: 1, mode: 0 },
          { email: 'legacy-gate@example.com', password: PASSWORD, event_id: 1, mode: 0 },
        ],
        customers: [{ phone: '+4915100000301', password: PASSWORD }],
      }),
    })
  })

  /** The password hashes a call checked. */
  async function hashChecks(call: () => Promise<unknown>): Promise<number> {
    const before = await metricValue(t, 'wristband_password_checks_total')
    await call()
    return (await metricValue(t, 'wristband_password_checks_total')) - before
  }

  /** Who the newest dashboard session belongs to. */
  const newestSession = () =>
    t.db.db
      .selectFrom('dashboard_sessions')
      .select('subject_kind')
      .orderBy('created_at', 'desc')
      .executeTakeFirstOrThrow()

  test("the dashboard's time does not depend on how many accounts match the name", async () => {
    // One hash per kind of account the name's form allows, whichever accounts exist: an e-mail address
    // may name a dashboard user, an administrator and a network manager, a plain username only a
    // dashboard user. Below, 0 to 3 accounts exist for each form.
    const names = [
      ['nobody@example.com', 3],
      ['solo-mail@example.com', 3],
      ['pair@example.com', 3],
      ['twin@example.com', 3],
      ['nobody-partner', 1],
      ['solo-partner', 1],
    ] as const
    for (const [name, hashes] of names) {
      let status = 0
      const checked = await hashChecks(async () => {
        status = (await postSignIn(t, name, 'wrong-password')).statusCode
      })
      assert.equal(status, 401, name)
      assert.equal(checked, hashes, `a wrong password for ${name}`)
    }
    // The right password of each of the three accounts one name belongs to: the same work, and the
    // password decides who signs in.
    for (const [password, kind] of [
      ['partner-pass', 'dashboard_user'],
      [PASSWORD, 'admin'],
      ['manager-pass', 'network_manager'],
    ] as const) {
      let status = 0
      const checked = await hashChecks(async () => {
        status = (await postSignIn(t, 'twin@example.com', password)).statusCode
      })
      assert.equal(status, 303, kind)
      assert.equal(checked, 3, `the right password of the ${kind}`)
      assert.equal((await newestSession()).subject_kind, kind)
    }
  })

  test('an unknown name costs the same hash checks as a known one, on every sign-in', async () => {
    const staff = (email: string, password: string) =>
      t.request({ method: 'POST', url: '/auth/login', payload: { email, password, role: 'admin' } })
    const consumer = (phone: string, password: string) =>
      t.request({ method: 'POST', url: '/auth/login/customer', payload: { phone, password } })
    const operator = (email: string, password: string) =>
      t.request({
        method: 'POST',
        url: '/devices/operator-token',
        payload: { email, password, dev_type: 'POS', dev_mac: 'AA:BB:CC:DD:EE:31' },
      })
    const cases = [
      [staff, 'ghost@example.com', 'ev1@example.com'],
      [consumer, '+4915100000399', '+4915100000001'],
      [operator, 'ghost-gate@example.com', 'op@example.com'],
    ] as const
    for (const [call, unknown, known] of cases) {
      const answers: number[] = []
      const checks = [
        await hashChecks(async () => answers.push((await call(unknown, PASSWORD)).statusCode)),
        await hashChecks(async () => answers.push((await call(known, 'wrong-password')).statusCode)),
        await hashChecks(async () => answers.push((await call(known, PASSWORD)).statusCode)),
      ]
      assert.deepEqual(answers, [401, 401, 200], known)
      assert.deepEqual(checks, [1, 1, 1], `hashes checked for ${known}: unknown, wrong, right`)
    }
  })

  test('the dashboard upgrades an old bcrypt hash, as every sign-in does', async () => {
    const form = (name: string) => async (password: string) =>
      (await postSignIn(t, name, password)).statusCode
    const api = (url: string, body: Record<string, string>) => async (password: string) =>
      (await t.request({ method: 'POST', url, payload: { ...body, password } })).statusCode
    // Each account: where its hash is stored, and its sign-in with the status of a success.
    const accounts = [
      ['dashboard_users', 'username', 'legacy-partner', form('legacy-partner'), 303],
      ['administrators', 'email', 'legacy-admin@example.com', form('legacy-admin@example.com'), 303],
      ['network_managers', 'email', 'legacy-nm@example.com', form('legacy-nm@example.com'), 303],
      ['customers', 'phone', '+4915100000301', api('/auth/login/customer', { phone: '+4915100000301' }), 200],
      [
        'users',
        'email',
        'legacy-gate@example.com',
        api('/devices/operator-token', {
          email: 'legacy-gate@example.com',
          dev_type: 'POS',
          dev_mac: 'AA:BB:CC:DD:EE:32',
        }),
        200,
      ],
    ] as const
    const row = (table: string, column: string, value: string) =>
      sql`${sql.table(table)} where ${sql.ref(column)} = ${value}`
    const stored = () =>
      Promise.all(
        accounts.map(async ([table, column, value]) => {
          const r = await sql<{
            password_hash: string
          }>`select password_hash from ${row(table, column, value)}`.execute(t.db.db)
          return r.rows[0]?.password_hash
        }),
      )
    const signInAll = async (password: string) => {
      const answers: number[] = []
      for (const account of accounts) answers.push(await account[3](password))
      return answers
    }
    const legacy = await bcryptHash(LEGACY, 8)
    for (const [table, column, value] of accounts)
      await sql`update ${sql.table(table)} set password_hash = ${legacy} where ${sql.ref(column)} = ${value}`.execute(
        t.db.db,
      )
    const succeeded = accounts.map((a) => a[4])

    assert.deepEqual(await signInAll('wrong-password'), [401, 401, 401, 401, 401])
    assert.deepEqual(await stored(), Array(accounts.length).fill(legacy), 'no re-hash after a failure')
    assert.deepEqual(await signInAll(LEGACY), succeeded)
    const upgraded = await stored()
    for (const h of upgraded) assert.match(h ?? '', OWASP_ARGON2ID)
    assert.deepEqual(await signInAll(LEGACY), succeeded, 'the new hashes verify')
    assert.deepEqual(await stored(), upgraded, 're-hashed once')
  })

  test('the devices path does not reset the back-off before checking the device type', async () => {
    const operatorToken = (password: string, dev_type: string) =>
      t.request({
        method: 'POST',
        url: '/devices/operator-token',
        payload: { email: 'gate-mode0@example.com', password, dev_type, dev_mac: 'AA:BB:CC:DD:EE:33' },
      })
    for (let i = 0; i < BACKOFF_POLICY.FREE_FAILURES; i++)
      assert.equal((await operatorToken('wrong-password', 'POS')).statusCode, 401)
    // The right password for a device type mode 0 may not use: refused, and counted like a wrong one
    // (it starts the lock) instead of forgetting the five failures before it.
    const refused = await operatorToken(PASSWORD, 'REPORT')
    assert.equal(refused.statusCode, 401)
    assert.equal((await operatorToken(PASSWORD, 'POS')).statusCode, 429, 'the count was reset')
    t.clock.advance(BACKOFF_POLICY.MAX_LOCK_MS + 1)
    assert.equal((await operatorToken(PASSWORD, 'POS')).statusCode, 200)
  })
})
