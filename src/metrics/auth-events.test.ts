import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { type CryptoKey, exportJWK, generateKeyPair, SignJWT } from 'jose'
import { forEachBackend, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { cookieOf, postSignIn, postSignInCode } from '../../test/helpers/dashboard.js'
import { enrolMfa, nextCode } from '../../test/helpers/mfa.js'
import {
  PASSKEY_ENV,
  passkeySignIn,
  registerPasskey,
  softAuthenticator,
} from '../../test/helpers/passkeys.js'
import { metricValue } from '../../test/helpers/scrape.js'
import { SmsInbox } from '../../test/helpers/sms.js'
import { AUTH_EVENTS, AUTH_REASONS } from '../platform/auth-events.js'

/**
 * wristband_auth_events_total: every kind of authentication event moves its series through HTTP, as
 * a client causes it, with the outcome and reason named in docs/observability.md.
 */

// A provider of ID tokens for the IdP sign-in: a key set served over HTTP.
const idpKey = await generateKeyPair('ES256')
const jwks = { keys: [{ ...(await exportJWK(idpKey.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' }] }
const idp = createServer((_req, res) =>
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks)),
)
await new Promise<void>((resolve) => idp.listen(0, '127.0.0.1', resolve))
after(() => new Promise<void>((resolve) => idp.close(() => resolve())))
const ISSUER = `http://127.0.0.1:${(idp.address() as AddressInfo).port}`

const sms = new SmsInbox()
const PHONE = '+4915100000001'

const env = {
  ...PASSKEY_ENV,
  IDP_ISSUERS: JSON.stringify([{ issuer: ISSUER, audience: 'wristband-app', jwks_uri: `${ISSUER}/keys` }]),
}

type Labels = { event: string; outcome: 'success' | 'failure'; reason: string }

forEachBackend(
  httpBackends,
  'wristband_auth_events_total',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed(
        withStandardSeed({
          administrators: [
            { email: 'mfa@example.com', password: 's3cret-pass', role: 'superadmin', event_ids: [] },
            { email: 'locked@example.com', password: 's3cret-pass', role: 'admin', event_ids: [1] },
            { email: 'pk@example.com', password: 's3cret-pass', role: 'superadmin', event_ids: [] },
          ],
        }),
      )
    })

    const count = (labels: Labels) => metricValue(t, 'wristband_auth_events_total', labels)
    /** Runs `act` and asserts that it moved each of `series` by exactly one. */
    async function moves(series: Labels[], act: () => Promise<void>): Promise<void> {
      const before = await Promise.all(series.map(count))
      await act()
      const after = await Promise.all(series.map(count))
      assert.deepEqual(
        after.map((v, i) => v - before[i]!),
        series.map(() => 1),
        JSON.stringify(series),
      )
    }
    const ok = (event: string): Labels => ({ event, outcome: 'success', reason: 'none' })
    const failed = (event: string, reason: string): Labels => ({ event, outcome: 'failure', reason })
    const status = async (expected: number, res: Promise<{ statusCode: number; body: string }>) => {
      const r = await res
      assert.equal(r.statusCode, expected, r.body)
    }

    test('every event starts at 0 on its success, usual refusal and lockout series', async () => {
      const text = (await t.app.metrics.scrape()).body
      for (const event of Object.keys(AUTH_EVENTS)) {
        const present = text.includes(`wristband_auth_events_total{event="${event}"`)
        assert.ok(present, `${event} is pre-initialised`)
      }
      for (const m of text.matchAll(
        /^wristband_auth_events_total\{event="(\w+)",outcome="(\w+)",reason="(\w+)"\}/gm,
      )) {
        assert.ok(m[1]! in AUTH_EVENTS, m[1])
        assert.ok(['success', 'failure'].includes(m[2]!), m[2])
        assert.ok((AUTH_REASONS as readonly string[]).includes(m[3]!), m[3])
      }
    })

    describe('staff sign-in at /auth/login, by account kind', () => {
      const signIn = (email: string, role: string, password = 's3cret-pass') =>
        t.request({ method: 'POST', url: '/auth/login', payload: { email, password, role } })
      for (const [role, email] of [
        ['admin', 'root@example.com'],
        ['operator', 'op@example.com'],
        ['network_manager', 'nm@example.com'],
      ] as const) {
        test(`login_${role}: success and a wrong password`, async () => {
          await moves([ok(`login_${role}`)], () => status(200, signIn(email, role)))
          await moves([failed(`login_${role}`, 'invalid_credentials')], () =>
            status(401, signIn(email, role, 'wrong-password')),
          )
        })
      }

      test('lockout: past the free failures the back-off refuses the attempt (429, reason locked)', async () => {
        for (let i = 0; i < 6; i++) await status(401, signIn('locked@example.com', 'admin', 'wrong-password'))
        await moves([failed('login_admin', 'locked')], () =>
          status(429, signIn('locked@example.com', 'admin')),
        )
      })
    })

    test('login_consumer_password and login_consumer_otp', async () => {
      const customer = (password: string) =>
        t.request({ method: 'POST', url: '/auth/login/customer', payload: { phone: PHONE, password } })
      await moves([ok('login_consumer_password')], () => status(200, customer('s3cret-pass')))
      await moves([failed('login_consumer_password', 'invalid_credentials')], () =>
        status(401, customer('wrong-password')),
      )
      const verify = (code: string) =>
        t.request({ method: 'POST', url: '/auth/login/phone/verify', payload: { phone: PHONE, code } })
      await status(200, t.request({ method: 'POST', url: '/auth/login/phone', payload: { phone: PHONE } }))
      const code = sms.codeFor(PHONE)
      const wrong = code === '000000' ? '111111' : '000000'
      await moves([failed('login_consumer_otp', 'invalid_credentials')], () => status(401, verify(wrong)))
      await moves([ok('login_consumer_otp')], () => status(200, verify(code)))
    })

    test('login_idp: a provider token signs in, a forged one is refused', async () => {
      const idToken = async (key: CryptoKey) => {
        const now = Math.floor(t.clock.now() / 1000)
        return new SignJWT({})
          .setProtectedHeader({ alg: 'ES256', kid: 'k1', typ: 'JWT' })
          .setIssuer(ISSUER)
          .setAudience('wristband-app')
          .setSubject(`subject-${now}`)
          .setIssuedAt(now)
          .setExpirationTime(now + 300)
          .sign(key)
      }
      const signIn = async (key: CryptoKey) =>
        t.request({ method: 'POST', url: '/auth/login/idp', payload: { id_token: await idToken(key) } })
      await moves([ok('login_idp')], () => status(200, signIn(idpKey.privateKey)))
      const forger = await generateKeyPair('ES256')
      await moves([failed('login_idp', 'invalid_credentials')], () => status(401, signIn(forger.privateKey)))
    })

    test('login_device and login_device_operator', async () => {
      const device = (dev_mac: string) =>
        t.request({ method: 'POST', url: '/auth/login/device', payload: { dev_mac, event_id: 1 } })
      await moves([ok('login_device')], () => status(200, device('AA:BB:CC:DD:EE:01')))
      await moves([failed('login_device', 'invalid_credentials')], () =>
        status(404, device('AA:BB:CC:DD:EE:99')),
      )
      const operator = (password: string) =>
        t.request({
          method: 'POST',
          url: '/devices/operator-token',
          payload: { email: 'op@example.com', password, dev_type: 'POS', dev_mac: 'AA:BB:CC:DD:EE:01' },
        })
      await moves([ok('login_device_operator')], () => status(200, operator('s3cret-pass')))
      await moves([failed('login_device_operator', 'invalid_credentials')], () =>
        status(401, operator('wrong-password')),
      )
    })

    test('login_dashboard', async () => {
      await moves([ok('login_dashboard')], async () => {
        const res = await postSignIn(t, 'partner1', 's3cret-pass')
        assert.equal(res.statusCode, 303)
      })
      await moves([failed('login_dashboard', 'invalid_credentials')], async () => {
        const res = await postSignIn(t, 'partner1', 'wrong-password')
        assert.equal(res.statusCode, 401)
      })
    })

    test('refresh, and a refresh token presented again (reuse_detected)', async () => {
      const { refresh_token } = await login(t, 'root@example.com')
      const refresh = () => t.request({ method: 'POST', url: '/auth/refresh', payload: { refresh_token } })
      await moves([ok('refresh')], () => status(200, refresh()))
      await moves([failed('refresh', 'reuse_detected')], () => status(401, refresh()))
      await moves([failed('refresh', 'invalid_token')], async () => {
        const res = await t.request({
          method: 'POST',
          url: '/auth/refresh',
          payload: { refresh_token: 'x.y.z' },
        })
        assert.equal(res.statusCode, 401)
      })
    })

    test('mfa_verify (a wrong, a good and a replayed code) and mfa_challenge (fresh MFA, sign-in step)', async () => {
      const secret = await enrolMfa(t, 'mfa@example.com')
      const { access_token } = await login(t, 'mfa@example.com')
      const verify = (code: string) =>
        t.request({ method: 'POST', url: '/admin/mfa/verify', token: access_token, payload: { code } })
      const code = nextCode(t, secret)
      await moves([failed('mfa_verify', 'invalid_credentials')], () =>
        status(400, verify(code === '000000' ? '111111' : '000000')),
      )
      await moves([ok('mfa_verify')], () => status(200, verify(code)))
      await moves([failed('mfa_verify', 'replayed')], () => status(400, verify(code)))
      // A credential route without a fresh verification asks for one.
      await moves([{ event: 'mfa_challenge', outcome: 'success', reason: 'fresh_mfa' }], () =>
        status(403, t.request({ method: 'POST', url: '/admin/mfa/setup', token: access_token })),
      )
      // The dashboard's password step of an administrator with MFA asks for the code, then takes it.
      let pending = ''
      await moves(
        [ok('login_dashboard'), { event: 'mfa_challenge', outcome: 'success', reason: 'sign_in' }],
        async () => {
          const res = await postSignIn(t, 'mfa@example.com', 's3cret-pass')
          assert.equal(res.statusCode, 303)
          pending = cookieOf(res, 'wb_login_pending')!.value
        },
      )
      await moves([ok('mfa_verify')], async () => {
        const res = await postSignInCode(t, pending, nextCode(t, secret))
        assert.equal(res.statusCode, 303)
      })
    })

    test('passkey_register and passkey_sign_in', async () => {
      const authenticator = softAuthenticator()
      const { access_token } = await login(t, 'pk@example.com')
      await moves([ok('passkey_register')], async () => {
        const res = await registerPasskey(t, access_token, authenticator)
        assert.equal(res.statusCode, 201, res.body)
      })
      await moves([ok('passkey_sign_in')], async () => {
        const res = await passkeySignIn(t, authenticator)
        assert.equal(res.statusCode, 200, res.body)
      })
      // A signature counter that did not grow: a cloned authenticator.
      await moves([failed('passkey_sign_in', 'invalid_credentials')], async () => {
        const res = await passkeySignIn(t, authenticator, { counter: 0 })
        assert.equal(res.statusCode, 401, res.body)
      })
    })

    test('password_reset_request (known and unknown address) and password_reset (a dead link)', async () => {
      const ask = (email: string) =>
        t.request({ method: 'POST', url: '/admin/password-reset/email-send', payload: { email } })
      await moves([ok('password_reset_request')], () => status(200, ask('ev1@example.com')))
      // Answered as for a known address; counted as what it is.
      await moves([failed('password_reset_request', 'unknown_account')], () =>
        status(200, ask('nobody@example.com')),
      )
      await moves([failed('password_reset', 'invalid_token')], () =>
        status(
          410,
          t.request({
            method: 'POST',
            url: `/admin/password-reset/${'y'.repeat(43)}`,
            payload: { new_password: 'brand-new-pass' },
          }),
        ),
      )
    })
  },
  env,
  () => ({ sms }),
)
