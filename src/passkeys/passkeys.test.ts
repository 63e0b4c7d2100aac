import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import {
  eventAdmin,
  forEachBackend,
  login,
  PRODUCTION_ENV,
  type TestApp,
  withStandardSeed,
  withTwoInstances,
} from '../../test/helpers/app.js'
import type { SoftAuthenticator } from '../../test/helpers/authenticator.js'
import { backends, eachBackend } from '../../test/helpers/backends.js'
import {
  auditOf,
  PASSKEY_ENV,
  passkeySignIn,
  RP_ID,
  registerPasskey,
  softAuthenticator,
} from '../../test/helpers/passkeys.js'

/**
 * Passkeys through the API with a software authenticator (real attestation and assertion objects, its
 * own P-256 keys): registration, sign-in as first and second factor, and every refusal the issue names,
 * each answered without a token and audited with its reason.
 */
const ALICE = 'pk-alice@example.com'
const BOB = 'pk-bob@example.com'
const CAROL = 'pk-carol@example.com'
const DAVE = 'pk-dave@example.com'

forEachBackend(
  backends,
  'passkeys: registration, sign-in and refusals',
  (ctx) => {
    let t: TestApp
    const keys: Record<string, SoftAuthenticator> = {}
    const ids: Record<string, number> = {}
    before(async () => {
      t = ctx()
      await t.seed(
        withStandardSeed({
          administrators: [eventAdmin(ALICE), eventAdmin(BOB), eventAdmin(CAROL), eventAdmin(DAVE)],
        }),
      )
      for (const email of [ALICE, BOB, CAROL, DAVE]) {
        ids[email] = (
          await t.db.db
            .selectFrom('administrators')
            .select('id')
            .where('email', '=', email)
            .executeTakeFirstOrThrow()
        ).id
        keys[email] = softAuthenticator()
        // No MFA yet: the password's token registers the first passkey (as it enrols the first TOTP secret).
        const res = await registerPasskey(t, (await login(t, email)).access_token, keys[email]!, {}, 'Laptop')
        assert.equal(res.statusCode, 201, res.body)
      }
    })

    const actor = (email: string) => `admin:${ids[email]}`
    const lastRefusal = async (kind: string, email: string) => (await auditOf(t, kind, actor(email))).at(-1)

    test('a registered passkey is listed, and signs in as a first factor with a fresh mfa_verified_at', async () => {
      const { access_token } = await login(t, ALICE)
      const list = await t.request({ method: 'GET', url: '/admin/passkeys', token: access_token })
      assert.equal(list.statusCode, 200, list.body)
      assert.deepEqual(
        list.json().map((p: { name: string; transports: string[] }) => [p.name, p.transports]),
        [['Laptop', ['internal']]],
      )
      const registered = await auditOf(t, 'passkey_registered', actor(ALICE))
      assert.deepEqual(
        registered.map((r) => r.outcome),
        ['success'],
      )

      const res = await passkeySignIn(t, keys[ALICE]!)
      assert.equal(res.statusCode, 200, res.body)
      assert.equal(res.options.rpId, RP_ID)
      assert.equal(res.options.userVerification, 'required')
      const tokens = res.json()
      const ping = await t.request({
        method: 'GET',
        url: '/admin/sensitive/ping',
        token: tokens.access_token,
      })
      assert.equal(ping.statusCode, 200, `a passkey is two factors: ${ping.body}`)
      // The refresh token keeps the verification, as after /admin/mfa/verify.
      const refreshed = await t.request({
        method: 'POST',
        url: '/auth/refresh',
        payload: { refresh_token: tokens.refresh_token },
      })
      assert.equal(refreshed.statusCode, 200)
      const again = await t.request({
        method: 'GET',
        url: '/admin/sensitive/ping',
        token: refreshed.json().access_token,
      })
      assert.equal(again.statusCode, 200)
      const signIns = await auditOf(t, 'passkey_sign_in', actor(ALICE))
      assert.equal(signIns.at(-1)?.outcome, 'success')
      assert.equal(signIns.at(-1)?.detail.second_factor, false)
    })

    test('as a second factor: the challenge is bound to the password session and lists its passkeys', async () => {
      const { access_token } = await login(t, BOB)
      const res = await passkeySignIn(t, keys[BOB]!, {}, access_token)
      assert.equal(res.statusCode, 200, res.body)
      assert.deepEqual(
        res.options.allowCredentials.map((c: { id: string }) => c.id),
        keys[BOB]!.credentials.map((c) => c.id.toString('base64url')),
      )
      const ping = await t.request({
        method: 'GET',
        url: '/admin/sensitive/ping',
        token: res.json().access_token,
      })
      assert.equal(ping.statusCode, 200)
      assert.equal((await lastRefusal('passkey_sign_in', BOB))?.detail.second_factor, true)
    })

    test("another account's passkey is refused for a challenge bound to an account, and audited", async () => {
      const { access_token } = await login(t, BOB)
      // Bob's session asks; Alice's authenticator answers with Alice's credential.
      const res = await passkeySignIn(
        t,
        keys[ALICE]!,
        { credential: keys[ALICE]!.credentials[0]! },
        access_token,
      )
      assert.equal(res.statusCode, 401, res.body)
      assert.equal((await lastRefusal('passkey_sign_in', ALICE))?.detail.reason, 'other_account')
      // And a flow one session asked for cannot be finished from another (or from none).
      const opts = await t.request({ method: 'POST', url: '/auth/passkey/options', token: access_token })
      const { flow, options } = opts.json()
      const response = keys[BOB]!.assert(options)
      const stolen = await t.request({ method: 'POST', url: '/auth/passkey', payload: { flow, response } })
      assert.equal(stolen.statusCode, 401)
      const refusals = await auditOf(t, 'passkey_sign_in', 'unknown')
      assert.equal(refusals.at(-1)?.detail.reason, 'session')
    })

    test('a wrong origin, a wrong RP ID and a missing user verification are refused and audited', async () => {
      for (const [ceremony, reason] of [
        [{ origin: 'https://wristband.test.evil.example' }, 'origin'],
        [{ rpId: 'evil.example' }, 'rp_id'],
        [{ userVerified: false }, 'user_verification'],
      ] as const) {
        const res = await passkeySignIn(t, keys[CAROL]!, ceremony)
        assert.equal(res.statusCode, 401, `${reason}: ${res.body}`)
        assert.equal(res.json().access_token, undefined)
        assert.equal((await lastRefusal('passkey_sign_in', CAROL))?.detail.reason, reason)
      }
      // The same at registration: nothing stored.
      const { access_token } = await passkeySignIn(t, keys[CAROL]!).then((r) => r.json())
      for (const [ceremony, reason] of [
        [{ origin: 'https://evil.example' }, 'origin'],
        [{ rpId: 'evil.example' }, 'rp_id'],
        [{ userVerified: false }, 'user_verification'],
      ] as const) {
        const res = await registerPasskey(t, access_token, softAuthenticator(), ceremony)
        assert.equal(res.statusCode, 400, `${reason}: ${res.body}`)
        assert.equal((await lastRefusal('passkey_registered', CAROL))?.detail.reason, reason)
      }
      const list = await t.request({ method: 'GET', url: '/admin/passkeys', token: access_token })
      assert.equal(list.json().length, 1)
    })

    test('a challenge answers once: a replayed assertion and a foreign challenge are refused', async () => {
      const first = await passkeySignIn(t, keys[CAROL]!)
      assert.equal(first.statusCode, 200, first.body)
      const replay = await t.request({
        method: 'POST',
        url: '/auth/passkey',
        payload: { flow: first.flow, response: first.response },
      })
      assert.equal(replay.statusCode, 401)
      assert.equal((await auditOf(t, 'passkey_sign_in', 'unknown')).at(-1)?.detail.reason, 'challenge')
      // A live flow answered with an assertion over another (used) challenge.
      const opts = await t.request({ method: 'POST', url: '/auth/passkey/options' })
      const { flow, options } = opts.json()
      const response = keys[CAROL]!.assert(options, { challenge: first.options.challenge })
      const foreign = await t.request({ method: 'POST', url: '/auth/passkey', payload: { flow, response } })
      assert.equal(foreign.statusCode, 401)
      assert.equal((await lastRefusal('passkey_sign_in', CAROL))?.detail.reason, 'challenge')
      // An expired challenge.
      const late = await t.request({ method: 'POST', url: '/auth/passkey/options' })
      t.clock.advance(5 * 60_000 + 1)
      const lateRes = await t.request({
        method: 'POST',
        url: '/auth/passkey',
        payload: { flow: late.json().flow, response: keys[CAROL]!.assert(late.json().options) },
      })
      assert.equal(lateRes.statusCode, 401)
    })

    test('a signature counter going backwards (a cloned authenticator) is refused and audited', async () => {
      const ok = await passkeySignIn(t, keys[DAVE]!)
      assert.equal(ok.statusCode, 200, ok.body)
      const seen = keys[DAVE]!.credentials[0]!.counter
      const clone = await passkeySignIn(t, keys[DAVE]!, { counter: seen - 1 })
      assert.equal(clone.statusCode, 401)
      assert.equal((await lastRefusal('passkey_sign_in', DAVE))?.detail.reason, 'counter')
      const same = await passkeySignIn(t, keys[DAVE]!, { counter: seen })
      assert.equal(same.statusCode, 401)
      const stored = await t.db.db
        .selectFrom('passkeys')
        .select('counter')
        .where('subject_id', '=', ids[DAVE]!)
        .executeTakeFirstOrThrow()
      assert.equal(Number(stored.counter), seen)
    })

    test('a removed passkey no longer signs in; removing needs fresh MFA once the account has a passkey', async () => {
      const passwordOnly = (await login(t, DAVE)).access_token
      const list = await t.request({ method: 'GET', url: '/admin/passkeys', token: passwordOnly })
      const id = list.json()[0].id
      const denied = await t.request({ method: 'DELETE', url: `/admin/passkeys/${id}`, token: passwordOnly })
      assert.equal(denied.statusCode, 403, denied.body)
      assert.equal(denied.json().error, 'mfa_required')
      const more = await t.request({
        method: 'POST',
        url: '/admin/passkeys/registration/options',
        token: passwordOnly,
      })
      assert.equal(more.statusCode, 403, 'a password alone adds no passkey to an account that has one')

      const fresh = (await passkeySignIn(t, keys[DAVE]!)).json().access_token
      const other = await t.request({
        method: 'DELETE',
        url: `/admin/passkeys/${id}`,
        token: (await passkeySignIn(t, keys[ALICE]!)).json().access_token,
      })
      assert.equal(other.statusCode, 404, "another account's passkey is not found")
      const removed = await t.request({ method: 'DELETE', url: `/admin/passkeys/${id}`, token: fresh })
      assert.equal(removed.statusCode, 200, removed.body)
      assert.equal((await auditOf(t, 'passkey_removed', actor(DAVE))).length, 1)
      const after = await passkeySignIn(t, keys[DAVE]!)
      assert.equal(after.statusCode, 401)
      assert.equal(
        (await auditOf(t, 'passkey_sign_in', 'unknown')).at(-1)?.detail.reason,
        'unknown_credential',
      )
    })

    test('bad input is a 422 that changes nothing; a flow of registration does not sign in', async () => {
      const noBody = await t.request({
        method: 'POST',
        url: '/auth/passkey',
        payload: { flow: 'x'.repeat(40) },
      })
      assert.equal(noBody.statusCode, 422)
      const opts = await t.request({
        method: 'POST',
        url: '/admin/passkeys/registration/options',
        token: (await passkeySignIn(t, keys[ALICE]!)).json().access_token,
      })
      const { flow } = opts.json()
      const res = await t.request({
        method: 'POST',
        url: '/auth/passkey',
        payload: { flow, response: keys[ALICE]!.assert({ challenge: opts.json().options.challenge }) },
      })
      assert.equal(res.statusCode, 401)
    })
  },
  PASSKEY_ENV,
)

forEachBackend(
  backends,
  'passkey sign-in spends the password back-off budget',
  (ctx) => {
    test('failed passkey sign-ins count on the password budget: they lock the password too', async () => {
      const t = ctx()
      const ERIN = 'pk-erin@example.com'
      await t.seed(withStandardSeed({ administrators: [eventAdmin(ERIN)] }))
      const key = softAuthenticator()
      assert.equal((await registerPasskey(t, (await login(t, ERIN)).access_token, key)).statusCode, 201)
      let locked = false
      for (let i = 0; i < 10 && !locked; i++) {
        const res = await passkeySignIn(t, key, { origin: 'https://evil.example' })
        locked = res.statusCode === 429
        if (!locked) assert.equal(res.statusCode, 401)
      }
      assert.ok(locked, 'failed passkey sign-ins meet the back-off')
      const password = await t.request({
        method: 'POST',
        url: '/auth/login',
        payload: { email: ERIN, password: 's3cret-pass' },
      })
      assert.equal(password.statusCode, 429, 'one budget: the password is locked too')
    })
  },
  PASSKEY_ENV,
)

eachBackend(backends, 'passkeys across a fleet of two instances', (backend) => {
  test('a challenge asked at one instance is answered at the other, once; the counter is shared', async () => {
    await withTwoInstances(backend, PASSKEY_ENV, async (a, b) => {
      const FRANK = 'pk-frank@example.com'
      await a.seed(withStandardSeed({ administrators: [eventAdmin(FRANK)] }))
      const key = softAuthenticator()
      assert.equal((await registerPasskey(a, (await login(a, FRANK)).access_token, key)).statusCode, 201)
      const opts = await a.request({ method: 'POST', url: '/auth/passkey/options' })
      const payload = { flow: opts.json().flow, response: key.assert(opts.json().options) }
      const atB = await b.request({ method: 'POST', url: '/auth/passkey', payload })
      assert.equal(atB.statusCode, 200, atB.body)
      const againAtA = await a.request({ method: 'POST', url: '/auth/passkey', payload })
      assert.equal(againAtA.statusCode, 401, 'the challenge was answered at the other instance')
      // A clone replaying the counter B saw is refused at A.
      const seen = key.credentials[0]!.counter
      const clone = await passkeySignIn(a, key, { counter: seen })
      assert.equal(clone.statusCode, 401)
    })
  })
})

forEachBackend(
  backends,
  'passkeys off: production without WEBAUTHN_RP_ID',
  (ctx) => {
    test('the routes answer 404 and the sign-in pages offer no passkey', async () => {
      const t = ctx()
      assert.equal(t.config.WEBAUTHN_RP_ID, undefined)
      const opts = await t.request({ method: 'POST', url: '/auth/passkey/options' })
      assert.equal(opts.statusCode, 404, opts.body)
      assert.match(opts.json().detail, /WEBAUTHN_RP_ID/)
      const page = await t.request({ method: 'GET', url: '/dashboard/login' })
      assert.equal(page.statusCode, 200)
      assert.doesNotMatch(page.body, /passkey/i)
      assert.match(page.body, /autocomplete="username"/)
    })
  },
  { ...PRODUCTION_ENV },
)
