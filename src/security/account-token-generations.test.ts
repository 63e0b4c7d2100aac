import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import {
  eventAdmin,
  login,
  nextAddress,
  type TestApp,
  verifyToken,
  withStandardSeed,
  withTwoInstances,
} from '../../test/helpers/app.js'
import { type Backend, backends, eachBackend, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { cliEnv, ok, wristband } from '../../test/helpers/cli.js'
import { SmtpSink } from '../../test/helpers/smtp-sink.js'
import { until } from '../../test/helpers/until.js'

/**
 * F2 of the third audit (docs/security.md, "Third audit"): an offline token minted for an event alone
 * (no device) stayed good after an administrator disabled the account, reset its password or its MFA;
 * only device-bound tokens ended. Every account now has a token generation; those four and `wristband
 * admin end-tokens` start the next one, and every token minted under the old one (access, refresh,
 * offline with or without a device) is refused at /tokens/verify, /tokens/check, /oauth2/introspect,
 * /auth/refresh and the scanners' sync, by every instance of the fleet within the revocation promise.
 */
const EMAIL = 'f2@example.com'
const PASSWORD = 's3cret-pass'
const SEED = withStandardSeed({ administrators: [eventAdmin(EMAIL)], devices: [] })

const FORM = { 'content-type': 'application/x-www-form-urlencoded' }

interface Minted {
  access: string
  refresh: string
  /** Bound to event 1 alone. */
  offline: string
  /** Bound to the standard device of event 1. */
  deviceBound: string
}

/** What each place that checks a token answers for the ones of `m`. */
async function reach(t: TestApp, m: Minted, credential: string) {
  const check = await t.request({ method: 'GET', url: '/tokens/check', token: m.access })
  const introspect = await t.request({
    method: 'POST',
    url: '/oauth2/introspect',
    headers: { ...FORM, authorization: `Bearer ${credential}` },
    payload: new URLSearchParams({ token: m.offline }).toString(),
  })
  const sync = await t.request({ method: 'GET', url: '/events/1/scan-sync?limit=1', token: m.offline })
  return {
    access: (await verifyToken(t, m.access)).valid as boolean,
    offline: (await verifyToken(t, m.offline)).valid as boolean,
    deviceBound: (await verifyToken(t, m.deviceBound)).valid as boolean,
    refreshVerify: (await verifyToken(t, m.refresh)).valid as boolean,
    check: check.statusCode,
    introspect: introspect.json().active as boolean,
    sync: sync.statusCode,
  }
}

const GOOD = {
  access: true,
  offline: true,
  deviceBound: true,
  refreshVerify: true,
  check: 200,
  introspect: true,
  // An administrator's token is authenticated by the sync feed and then lacks the device's scope.
  sync: 403,
}
const ENDED = {
  access: false,
  offline: false,
  deviceBound: false,
  refreshVerify: false,
  check: 401,
  introspect: false,
  sync: 401,
}

async function mint(t: TestApp): Promise<Minted> {
  const pair = await login(t, EMAIL)
  const offline = async (extra: Record<string, unknown>) => {
    const res = await t.request({
      method: 'POST',
      url: '/tokens/offline',
      token: pair.access_token,
      payload: { event_id: 1, ...extra },
    })
    assert.equal(res.statusCode, 200, res.body)
    return res.json().offline_token as string
  }
  const device = await t.db.db.selectFrom('devices').select('id').executeTakeFirstOrThrow()
  return {
    access: pair.access_token,
    refresh: pair.refresh_token,
    offline: await offline({}),
    deviceBound: await offline({ device_id: String(device.id) }),
  }
}

/** A verify credential of event 1 (an API key with tokens:verify), made by the superadmin. */
async function verifyCredential(t: TestApp): Promise<string> {
  const root = (await login(t, 'root@example.com')).access_token
  const res = await t.request({
    method: 'POST',
    url: '/tokens/api-key',
    token: root,
    payload: { event_id: 1, name: `verify-${nextAddress()}`, scopes: ['tokens:verify'] },
  })
  assert.equal(res.statusCode, 200, res.body)
  return res.json().api_key
}

eachBackend(
  backends,
  'F2: an offline token minted for an event alone outlives its account',
  (backend: Backend) => {
    let p: ProvisionedBackend
    const sink = new SmtpSink()
    before(async () => {
      await sink.start()
      p = await backend.provision()
    })
    after(async () => {
      await sink.stop()
      await p?.dispose()
    })

    test('refused by both instances after disable, password resets (command line and e-mail), MFA reset and end-tokens', async () => {
      const env = cliEnv(p)
      await withTwoInstances(
        backend,
        { SMTP_URL: sink.url, JOBS_POLL_MS: '50' },
        async (a, b) => {
          await a.seed(SEED)
          const credential = await verifyCredential(a)
          /** Ends the account's tokens one way; answers the instance it was done on (or none: a process). */
          const ways: [string, () => Promise<void>, (() => Promise<void>)?][] = [
            [
              'wristband admin disable',
              async () => void ok(await wristband(['admin', 'disable', '--email', EMAIL], env)),
              async () => void ok(await wristband(['admin', 'enable', '--email', EMAIL], env)),
            ],
            [
              'wristband admin reset-password',
              async () =>
                void ok(
                  await wristband(
                    ['admin', 'reset-password', '--email', EMAIL, '--password-stdin'],
                    env,
                    PASSWORD,
                  ),
                ),
            ],
            [
              'a password reset by e-mail (on instance a)',
              async () => {
                const before = sink.to(EMAIL).length
                const sent = await a.request({
                  method: 'POST',
                  url: '/admin/password-reset/email-send',
                  payload: { email: EMAIL },
                })
                assert.equal(sent.statusCode, 200, sent.body)
                await until('the reset mail', async () =>
                  sink
                    .to(EMAIL)
                    .slice(before)
                    .some((m) => /Reset your wristband password/.test(m.subject ?? '')),
                )
                const mail = sink
                  .to(EMAIL)
                  .slice(before)
                  .find((m) => /Reset your wristband password/.test(m.subject ?? ''))!
                const link = /\/admin\/password-reset\/([A-Za-z0-9_-]+)/.exec(mail.text ?? '')![1]!
                const done = await a.request({
                  method: 'POST',
                  url: `/admin/password-reset/${link}`,
                  payload: { new_password: PASSWORD },
                })
                assert.equal(done.statusCode, 200, done.body)
              },
            ],
            [
              'wristband admin reset-mfa',
              async () => void ok(await wristband(['admin', 'reset-mfa', '--email', EMAIL], env)),
            ],
            [
              'wristband admin end-tokens',
              async () => void ok(await wristband(['admin', 'end-tokens', EMAIL], env)),
            ],
          ]
          for (const [way, end, restore] of ways) {
            const minted = await mint(a)
            assert.deepEqual(await reach(b, minted, credential), GOOD, `${way}: good before`)
            await end()
            for (const [name, t] of [
              ['a', a],
              ['b', b],
            ] as const)
              await until(
                `${way}: instance ${name} refuses the offline token for the event alone`,
                async () => !(await verifyToken(t, minted.offline)).valid,
              )
            assert.deepEqual(await reach(b, minted, credential), ENDED, `${way}: instance b`)
            assert.deepEqual(await reach(a, minted, credential), ENDED, `${way}: instance a`)
            const refreshed = await b.request({
              method: 'POST',
              url: '/auth/refresh',
              payload: { refresh_token: minted.refresh },
            })
            assert.equal(refreshed.statusCode, 401, `${way}: refresh`)
            await restore?.()
            // The account goes on: tokens minted from now on are good on both instances.
            const fresh = await mint(b)
            assert.deepEqual(await reach(a, fresh, credential), GOOD, `${way}: new tokens`)
            assert.deepEqual(await reach(a, minted, credential), ENDED, `${way}: the old ones stay ended`)
          }
          const audit = await a.db.db
            .selectFrom('audit_log')
            .select('detail')
            .where('kind', '=', 'cli_admin_end_tokens')
            .executeTakeFirstOrThrow()
          assert.equal(JSON.parse(audit.detail!).email, EMAIL)
        },
        p,
      )
    })
  },
)

eachBackend(
  backends,
  'wristband admin end-tokens --operator ends the tokens of the scanners signed in as it',
  (backend) => {
    let p: ProvisionedBackend
    before(async () => {
      p = await backend.provision()
    })
    after(() => p?.dispose())

    test("a device's token (the operator's account) is refused at the sync feed and verify by both instances", async () => {
      await withTwoInstances(
        backend,
        {},
        async (a, b) => {
          // A scanner with a device key (a key-less one holds no sync:* at all).
          const key = 'wbd_end-tokens-operator-0123456789'
          await a.seed(
            withStandardSeed({
              devices: [
                {
                  dev_mac: 'AA:BB:CC:DD:EE:61',
                  event_id: 1,
                  operator_email: 'op@example.com',
                  device_key: key,
                },
              ],
            }),
          )
          const signIn = async (t: TestApp) => {
            const res = await t.request({
              method: 'POST',
              url: '/auth/login/device',
              payload: { dev_mac: 'AA:BB:CC:DD:EE:61', event_id: 1, device_key: key },
            })
            assert.equal(res.statusCode, 200, res.body)
            return res.json().offline_token as string
          }
          const sync = async (t: TestApp, token: string) =>
            (await t.request({ method: 'GET', url: '/events/1/scan-sync?limit=1', token })).statusCode
          const device = await signIn(a)
          assert.equal(await sync(b, device), 200)
          ok(await wristband(['admin', 'end-tokens', '--operator', 'OP@example.com'], cliEnv(p)))
          for (const t of [a, b])
            await until('the device token is refused', async () => !(await verifyToken(t, device)).valid)
          assert.equal(await sync(a, device), 401)
          assert.equal(await sync(b, device), 401)
          // The scanner signs in again (its key, not the operator's password) and carries on.
          assert.equal(await sync(b, await signIn(b)), 200)
        },
        p,
      )
    })
  },
)
