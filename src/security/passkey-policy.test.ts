import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { backends } from '../../test/helpers/backends.js'
import { enrolMfa, nextCode } from '../../test/helpers/mfa.js'
import {
  auditOf,
  PASSKEY_ENV,
  passkeySignIn,
  registerPasskey,
  softAuthenticator,
} from '../../test/helpers/passkeys.js'

/**
 * PASSKEYS_REQUIRED_FOR=superadmin: a superadmin who registered a passkey can no longer
 * sign in with password + TOTP (403 `passkey_required`, audited), only with the passkey; an
 * administrator outside the scope keeps TOTP.
 */
const ROOT = 'policy-root@example.com'
const ADMIN = 'policy-admin@example.com'

forEachBackend(
  backends,
  'PASSKEYS_REQUIRED_FOR=superadmin',
  (ctx) => {
    let t: TestApp
    const secrets: Record<string, string> = {}
    before(async () => {
      t = ctx()
      await t.seed(
        withStandardSeed({
          administrators: [
            { email: ROOT, password: 's3cret-pass', role: 'superadmin', event_ids: [] },
            { email: ADMIN, password: 's3cret-pass', role: 'admin', event_ids: [1] },
          ],
        }),
      )
      secrets[ROOT] = await enrolMfa(t, ROOT)
      secrets[ADMIN] = await enrolMfa(t, ADMIN)
    })

    const totp = async (email: string) => {
      const { access_token } = await login(t, email)
      return t.request({
        method: 'POST',
        url: '/admin/mfa/verify',
        token: access_token,
        payload: { code: nextCode(t, secrets[email]!) },
      })
    }

    test('a superadmin cannot use password + TOTP after registering a passkey; the passkey signs in', async () => {
      const asked = await t.request({
        method: 'POST',
        url: '/auth/login',
        payload: { email: ROOT, password: 's3cret-pass' },
      })
      assert.equal(asked.json().passkey_policy, 'register_passkey', 'asked to register one at sign-in')
      const before = await totp(ROOT)
      assert.equal(
        before.statusCode,
        200,
        'without a passkey, TOTP still works (and is asked to register one)',
      )
      const key = softAuthenticator()
      const reg = await registerPasskey(t, before.json().access_token, key)
      assert.equal(reg.statusCode, 201, reg.body)

      const refused = await totp(ROOT)
      assert.equal(refused.statusCode, 403, refused.body)
      assert.equal(refused.json().error, 'passkey_required')
      assert.equal(refused.json().access_token, undefined)
      const denied = (await auditOf(t, 'mfa_verify')).filter((e) => e.outcome === 'denied')
      assert.equal(denied.at(-1)?.detail.reason, 'passkey_required')

      const told = await t.request({
        method: 'POST',
        url: '/auth/login',
        payload: { email: ROOT, password: 's3cret-pass' },
      })
      assert.equal(told.json().passkey_policy, 'use_passkey')
      const signedIn = await passkeySignIn(t, key)
      assert.equal(signedIn.statusCode, 200, signedIn.body)
      // As the second factor after the password, too.
      const second = await passkeySignIn(t, key, {}, told.json().access_token)
      assert.equal(second.statusCode, 200, second.body)
    })

    test('an administrator outside the scope keeps password + TOTP with a passkey', async () => {
      const first = await totp(ADMIN)
      assert.equal(first.statusCode, 200)
      assert.equal((await registerPasskey(t, first.json().access_token, softAuthenticator())).statusCode, 201)
      assert.equal((await totp(ADMIN)).statusCode, 200)
      const plain = await t.request({
        method: 'POST',
        url: '/auth/login',
        payload: { email: ADMIN, password: 's3cret-pass' },
      })
      assert.equal(plain.json().passkey_policy, undefined)
    })
  },
  { ...PASSKEY_ENV, PASSKEYS_REQUIRED_FOR: 'superadmin' },
)
