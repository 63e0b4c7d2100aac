// Provisioning by QR: an administrator creates a one-time set-up code for a registered device, the scanner
// exchanges it once (POST /devices/setup) for its credentials, signs in and syncs. Through HTTP, both backends.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { after, before, test } from 'node:test'
import { forEachBackend, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { ok, startAppWithCli, wristband } from '../../test/helpers/cli.js'
import type { SeedDocument } from '../seed/seed.js'

const SEED: SeedDocument = withStandardSeed({
  administrators: [{ email: 'ev2@example.com', password: 's3cret-pass', role: 'admin', event_ids: [2] }],
  devices: [
    { dev_mac: 'AA:BB:CC:DD:EE:21', event_id: 1, operator_email: 'op@example.com' },
    { dev_mac: 'AA:BB:CC:DD:EE:22', event_id: 1, operator_email: null },
    { dev_mac: 'AA:BB:CC:DD:EE:23', event_id: 1, operator_email: 'op@example.com', archived: true },
    {
      dev_mac: 'AA:BB:CC:DD:EE:24',
      event_id: 1,
      operator_email: 'op@example.com',
      device_key: 'wbd_old-key-of-24',
    },
    { dev_mac: 'AA:BB:CC:DD:EE:25', event_id: 1, operator_email: 'op@example.com' },
    { dev_mac: 'AA:BB:CC:DD:EE:26', event_id: 1, operator_email: 'op@example.com' },
  ],
})

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex')

forEachBackend(
  httpBackends,
  'device set-up codes',
  (ctx) => {
    let t: TestApp
    let ids: Record<string, number>
    before(async () => {
      t = ctx()
      const seeded = await t.seed(SEED)
      ids = Object.fromEntries(seeded.devices!.map((d) => [d.dev_mac.slice(-2), d.id!]))
    })

    // Signed in for each code: a test that moves the clock past the access token's lifetime ends it.
    const newCode = async (deviceId: number | string, token?: string) =>
      t.request({
        method: 'POST',
        url: `/devices/${deviceId}/setup-code`,
        token: token ?? (await login(t, 'root@example.com')).access_token,
      })
    const exchange = (code: string, address?: string) =>
      t.request({
        method: 'POST',
        url: '/devices/setup',
        payload: { code },
        ...(address ? { headers: { 'x-forwarded-for': address } } : {}),
      })
    const audit = (kind: string) =>
      t.db.db
        .selectFrom('audit_log')
        .select(['actor', 'outcome', 'detail'])
        .where('kind', '=', kind)
        .orderBy('id')
        .execute()

    test('an administrator creates a code; the scanner exchanges it for its credentials, signs in with them and syncs', async () => {
      const asked = t.clock.now()
      const created = await newCode(ids['21']!)
      assert.equal(created.statusCode, 200, created.body)
      const body = created.json()
      assert.match(body.code, /^wbsu_[A-Za-z0-9_-]{22}$/)
      assert.equal(body.setup_url, `${t.config.PUBLIC_BASE_URL}/scanner/#setup=${body.code}`)
      const expires = Date.parse(body.expires_at) - 10 * 60_000
      assert.ok(asked <= expires && expires <= t.clock.now(), body.expires_at)
      assert.equal(created.headers['cache-control'], 'no-store')

      const setUp = await exchange(body.code)
      assert.equal(setUp.statusCode, 200, setUp.body)
      const creds = setUp.json()
      assert.deepEqual(
        { ...creds, device_key: undefined },
        {
          device_id: ids['21'],
          dev_mac: 'AA:BB:CC:DD:EE:21',
          event_id: 1,
          device_key: undefined,
          event: { uid: 'summer-fest-2026', name: 'Summer Fest', timezone: 'Europe/Berlin' },
        },
      )
      assert.match(creds.device_key, /^wbd_/)

      // With DEVICE_KEYS_REQUIRED=true (this suite), only the key makes the device able to sign in.
      const signIn = await t.request({
        method: 'POST',
        url: '/auth/login/device',
        payload: { dev_mac: creds.dev_mac, event_id: creds.event_id, device_key: creds.device_key },
      })
      assert.equal(signIn.statusCode, 200, signIn.body)
      const sync = await t.request({
        method: 'GET',
        url: '/events/1/scan-sync?format=columns',
        token: signIn.json().offline_token,
      })
      assert.equal(sync.statusCode, 200, sync.body)

      // Once only.
      assert.equal((await exchange(body.code)).statusCode, 404)
      const rows = await audit('device_setup')
      assert.deepEqual(
        rows.slice(-2).map((r) => [r.actor, r.outcome, JSON.parse(r.detail!).reason ?? null]),
        [
          [`device:${ids['21']}`, 'success', null],
          [`device:${ids['21']}`, 'failure', 'used'],
        ],
      )
      const made = (await audit('device_setup_code')).at(-1)!
      assert.equal(made.outcome, 'success')
      assert.doesNotMatch(JSON.stringify(made), /wbsu_/)
    })

    test('a code is stored only as its SHA-256', async () => {
      const { code } = (await newCode(ids['25']!)).json()
      const rows = await t.db.db.selectFrom('device_setup_codes').selectAll().execute()
      assert.ok(rows.some((r) => r.code_hash === sha256(code)))
      assert.doesNotMatch(JSON.stringify(rows), new RegExp(code))
    })

    test('a code expires after DEVICE_SETUP_CODE_MINUTES; a new code replaces the unused one', async () => {
      const first = (await newCode(ids['25']!)).json().code
      const second = (await newCode(ids['25']!)).json().code
      assert.equal((await exchange(first)).statusCode, 404)
      t.clock.advance(10 * 60_000)
      assert.equal((await exchange(second)).statusCode, 404)
      const reasons = (await audit('device_setup')).slice(-2).map((r) => JSON.parse(r.detail!).reason)
      assert.deepEqual(reasons, ['unknown', 'expired'])
      // At the last millisecond it still works (the clock held still: no time passes between the calls).
      t.clock.freeze()
      try {
        const third = (await newCode(ids['25']!)).json().code
        t.clock.advance(10 * 60_000 - 1)
        assert.equal((await exchange(third)).statusCode, 200)
      } finally {
        t.clock.thaw()
      }
    })

    test('the exchange gives a new key: the old key and the tokens signed in with it end', async () => {
      const old = await t.request({
        method: 'POST',
        url: '/auth/login/device',
        payload: { dev_mac: 'AA:BB:CC:DD:EE:24', event_id: 1, device_key: 'wbd_old-key-of-24' },
      })
      assert.equal(old.statusCode, 200, old.body)
      const oldToken = old.json().offline_token
      const { code } = (await newCode(ids['24']!)).json()
      const creds = (await exchange(code)).json()
      const again = await t.request({
        method: 'POST',
        url: '/auth/login/device',
        payload: { dev_mac: 'AA:BB:CC:DD:EE:24', event_id: 1, device_key: 'wbd_old-key-of-24' },
      })
      assert.equal(again.statusCode, 401)
      const verify = await t.request({ method: 'POST', url: '/tokens/verify', payload: { token: oldToken } })
      assert.equal(verify.json().valid, false)
      const fresh = await t.request({
        method: 'POST',
        url: '/auth/login/device',
        payload: { dev_mac: 'AA:BB:CC:DD:EE:24', event_id: 1, device_key: creds.device_key },
      })
      assert.equal(fresh.statusCode, 200)
    })

    test('who may create one, and for which device: 404 unknown or archived, 403 another event or an operator, 409 without an operator', async () => {
      assert.equal((await newCode(99_999)).statusCode, 404)
      assert.equal((await newCode(ids['23']!)).statusCode, 404)
      const ev2 = (await login(t, 'ev2@example.com')).access_token
      assert.equal((await newCode(ids['26']!, ev2)).statusCode, 403)
      const ev1 = (await login(t, 'ev1@example.com')).access_token
      assert.equal((await newCode(ids['26']!, ev1)).statusCode, 200)
      const none = await newCode(ids['22']!)
      assert.equal(none.statusCode, 409)
      assert.match(none.json().detail, /no operator/)
      const op = (await login(t, 'op@example.com', 'operator')).access_token
      assert.equal((await newCode(ids['26']!, op)).statusCode, 403)
      assert.equal(
        (await t.request({ method: 'POST', url: `/devices/${ids['26']}/setup-code` })).statusCode,
        401,
      )
      assert.equal((await newCode('0x1')).statusCode, 422)
    })

    test('a code for a device archived after it was made is refused, and counts as not used', async () => {
      const { code } = (await newCode(ids['26']!)).json()
      await t.db.db.updateTable('devices').set({ archived: 1 }).where('id', '=', ids['26']!).execute()
      assert.equal((await exchange(code)).statusCode, 404)
      await t.db.db.updateTable('devices').set({ archived: 0 }).where('id', '=', ids['26']!).execute()
      assert.equal((await exchange(code)).statusCode, 200)
    })

    test('of eight exchanges of one code at once, exactly one gets the credentials', async () => {
      const { code } = (await newCode(ids['26']!)).json()
      const answers = await Promise.all(Array.from({ length: 8 }, () => exchange(code)))
      assert.deepEqual(answers.map((a) => a.statusCode).sort(), [200, 404, 404, 404, 404, 404, 404, 404])
    })

    test('bad input is 422 and changes nothing; exchanges are limited to 10 per minute per address', async () => {
      for (const payload of [{}, { code: '' }, { code: 'x'.repeat(129) }, { code: 'wbsu_x', extra: 1 }]) {
        const res = await t.request({ method: 'POST', url: '/devices/setup', payload })
        assert.equal(res.statusCode, 422, JSON.stringify(payload))
      }
      const address = '10.250.0.1'
      for (let i = 0; i < 10; i++) assert.equal((await exchange(`wbsu_guess${i}`, address)).statusCode, 404)
      const limited = await exchange('wbsu_guess10', address)
      assert.equal(limited.statusCode, 429)
      assert.equal(limited.json().error, 'rate_limit_exceeded')
    })
  },
  { DEVICE_KEYS_REQUIRED: 'true' },
)

eachBackend(httpBackends, 'wristband device setup-code', (backend) => {
  let t: TestApp
  let env: Record<string, string>
  let ids: Record<string, number>
  let close = async () => {}
  before(async () => {
    ;({ t, env, close } = await startAppWithCli(backend))
    const seeded = await t.seed(SEED)
    ids = Object.fromEntries(seeded.devices!.map((d) => [d.dev_mac.slice(-2), d.id!]))
  })
  after(() => close())

  test('prints a QR code, the code and its address; the code is exchanged once through HTTP; audited without it', async () => {
    const out = ok(await wristband(['device', 'setup-code', String(ids['21'])], env))
    const code = /^code: (wbsu_[A-Za-z0-9_-]{22})$/m.exec(out)?.[1]
    assert.ok(code, out)
    assert.match(out, new RegExp(`^url:  http://127\\.0\\.0\\.1:8000/scanner/#setup=${code}$`, 'm'))
    assert.match(out, new RegExp(`set-up code for device ${ids['21']} \\(AA:BB:CC:DD:EE:21\\) at event 1`))
    // The terminal QR code: rows of half blocks.
    assert.ok(out.split('\n').filter((l) => /[▀▄█]/.test(l)).length >= 10, out)
    const first = await t.request({ method: 'POST', url: '/devices/setup', payload: { code } })
    assert.equal(first.statusCode, 200, first.body)
    assert.equal(first.json().device_id, ids['21'])
    const second = await t.request({ method: 'POST', url: '/devices/setup', payload: { code } })
    assert.equal(second.statusCode, 404)
    const audit = await t.db.db
      .selectFrom('audit_log')
      .select(['actor', 'outcome', 'detail'])
      .where('kind', '=', 'cli_device_setup_code')
      .execute()
    assert.equal(audit.length, 1)
    assert.equal(audit[0]!.actor, 'cli')
    assert.doesNotMatch(audit[0]!.detail!, /wbsu_/)
  })

  test('refuses a missing or malformed id (exit 2), an unknown or archived device and one without an operator (exit 1)', async () => {
    const none = await wristband(['device', 'setup-code'], env)
    assert.equal(none.code, 2, none.stderr)
    const malformed = await wristband(['device', 'setup-code', '0x1'], env)
    assert.equal(malformed.code, 2, malformed.stderr)
    const unknown = await wristband(['device', 'setup-code', '99999'], env)
    assert.equal(unknown.code, 1)
    assert.match(unknown.stderr, /no device 99999/)
    const archived = await wristband(['device', 'setup-code', String(ids['23'])], env)
    assert.equal(archived.code, 1)
    const operatorless = await wristband(['device', 'setup-code', String(ids['22'])], env)
    assert.equal(operatorless.code, 1)
    assert.match(operatorless.stderr, /acts as no operator/)
  })
})
