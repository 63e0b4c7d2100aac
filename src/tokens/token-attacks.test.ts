import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { before, describe, test } from 'node:test'
import { decodeJwt, exportSPKI, generateKeyPair, type JWTPayload, SignJWT } from 'jose'
import { forEachBackend, login, TEST_SECRET, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  newTicketType,
  newTransfer,
  outboxMail,
  type PartnerKeys,
  seedPartner,
} from '../../test/helpers/partner.js'
import { waitFor } from '../../test/helpers/until.js'
import { keyId } from './jwt.js'

/**
 * RFC 8725 (JWT best current practice) attacks against the real routes: every forged token must be
 * refused by POST /tokens/verify ({valid: false}) and by a protected route (401).
 */
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url')

/** A compact JWS from an explicit header, with an HMAC-SHA256 signature under `key`. */
function hmacToken(header: Record<string, unknown>, payload: JWTPayload, key: string | Buffer): string {
  const input = `${b64(header)}.${b64(payload)}`
  return `${input}.${createHmac('sha256', key).update(input).digest('base64url')}`
}

const hs = (secret: string, payload: JWTPayload, header: Record<string, unknown> = {}, alg = 'HS256') =>
  new SignJWT(payload)
    .setProtectedHeader({ alg, typ: 'JWT', ...header })
    .sign(new TextEncoder().encode(secret))

forEachBackend(httpBackends, 'token attacks (RFC 8725)', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  /** The claims of a real superadmin access token, the template every forgery starts from. */
  let real: JWTPayload
  let realToken: string
  const now = () => Math.floor(t.clock.now() / 1000)
  /** The template with a fresh iat/exp, so only what a test changes differs from a good token. */
  const fresh = (over: JWTPayload = {}): JWTPayload => ({ ...real, iat: now(), exp: now() + 600, ...over })

  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
    realToken = (await login(t, 'root@example.com')).access_token
    real = decodeJwt(realToken)
  })

  const me = (token: string) => t.request({ method: 'GET', url: '/admin/me', token })
  const offline = (token: string) =>
    t.request({ method: 'POST', url: '/tokens/offline', token, payload: { event_id: 1 } })

  async function assertRefused(token: string, why: string) {
    assert.deepEqual(await verifyToken(t, token), { valid: false, claims: null }, `verify: ${why}`)
    assert.equal((await me(token)).statusCode, 401, `GET /admin/me: ${why}`)
    assert.equal((await offline(token)).statusCode, 401, `POST /tokens/offline: ${why}`)
  }

  test('control: a token signed as the service signs is accepted everywhere', async () => {
    const token = await hs(TEST_SECRET, fresh())
    assert.equal((await verifyToken(t, token)).valid, true)
    assert.equal((await me(token)).statusCode, 200)
    assert.equal((await offline(token)).statusCode, 200)
  })

  describe('signature and algorithm', () => {
    test('alg "none" (and "None", "NONE") with an empty signature', async () => {
      for (const alg of ['none', 'None', 'NONE'])
        await assertRefused(`${b64({ alg, typ: 'JWT' })}.${b64(fresh())}.`, `alg ${alg}`)
    })

    test('alg "none" keeping the original signature', async () => {
      const [, , sig] = realToken.split('.')
      await assertRefused(`${b64({ alg: 'none', typ: 'JWT' })}.${b64(fresh())}.${sig}`, 'none + signature')
    })

    test('HS256 signed with a different secret', async () => {
      await assertRefused(await hs('another-secret-that-is-also-32-bytes-long', fresh()), 'wrong secret')
    })

    test('HS512 and HS384 with the right secret', async () => {
      await assertRefused(await hs(TEST_SECRET, fresh(), {}, 'HS512'), 'HS512')
      await assertRefused(await hs(TEST_SECRET, fresh(), {}, 'HS384'), 'HS384')
    })

    test('RS256 signed with an attacker RSA key, its public key offered in jwk/jku/x5u', async () => {
      const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true })
      const token = await new SignJWT(fresh())
        .setProtectedHeader({
          alg: 'RS256',
          typ: 'JWT',
          kid: 'attacker',
          jku: 'http://127.0.0.1:9/jwks.json',
          x5u: 'http://127.0.0.1:9/cert.pem',
        })
        .sign(privateKey)
      await assertRefused(token, 'RS256 with an attacker key')
      // The classic confusion: the RSA public key (PEM) used as the HMAC secret, header RS256 or HS256.
      const pem = await exportSPKI(publicKey)
      await assertRefused(hmacToken({ alg: 'RS256', typ: 'JWT' }, fresh(), pem), 'public key as HMAC, RS256')
      await assertRefused(hmacToken({ alg: 'HS256', typ: 'JWT' }, fresh(), pem), 'public key as HMAC, HS256')
    })

    test('header alg RS256 over a valid HMAC signature with the right secret', async () => {
      await assertRefused(hmacToken({ alg: 'RS256', typ: 'JWT' }, fresh(), TEST_SECRET), 'alg swapped')
    })

    test('kid/jku/x5u in the header are ignored: they neither select a key nor help a forgery', async () => {
      const injected = {
        kid: '../../../../dev/null',
        jku: 'http://127.0.0.1:9/jwks.json',
        x5u: 'http://127.0.0.1:9/cert.pem',
      }
      // Signed with the service's secret: the injected fields change nothing, the token is good.
      const good = await hs(TEST_SECRET, fresh(), injected)
      assert.equal((await verifyToken(t, good)).valid, true)
      assert.equal((await me(good)).statusCode, 200)
      // Signed with an empty key (what a kid pointing at /dev/null would give): refused.
      await assertRefused(hmacToken({ alg: 'HS256', ...injected }, fresh(), ''), 'kid → empty key')
      await assertRefused(hmacToken({ alg: 'HS256', kid: "x' OR '1'='1" }, fresh(), 'x'), 'kid SQL injection')
    })

    test('payload edited, signature kept', async () => {
      const [h, , sig] = realToken.split('.')
      const edits: JWTPayload[] = [
        { ...real, sub: '2' },
        { ...real, exp: Number(real.exp) + 86400 },
        { ...real, permissions: { '*': ['events:manage'] } },
      ]
      for (const edited of edits) await assertRefused(`${h}.${b64(edited)}.${sig}`, 'edited payload')
      // The same claims with one byte of whitespace more: still an edit of the signed bytes.
      const spaced = Buffer.from(`${JSON.stringify(real)} `).toString('base64url')
      await assertRefused(`${h}.${spaced}.${sig}`, 'whitespace added')
    })
  })

  describe('claims', () => {
    test('exp in the past, nbf in the future', async () => {
      await assertRefused(await hs(TEST_SECRET, fresh({ iat: now() - 1200, exp: now() - 10 })), 'expired')
      await assertRefused(await hs(TEST_SECRET, fresh({ nbf: now() + 3600 })), 'not yet valid')
    })

    test('wrong or missing aud and iss; missing exp', async () => {
      await assertRefused(await hs(TEST_SECRET, fresh({ aud: 'another-service' })), 'wrong aud')
      await assertRefused(await hs(TEST_SECRET, fresh({ iss: 'https://evil.example' })), 'wrong iss')
      await assertRefused(await hs(TEST_SECRET, fresh({ aud: ['another-service'] })), 'aud array')
      for (const claim of ['aud', 'iss', 'exp'] as const) {
        const { [claim]: _dropped, ...rest } = fresh()
        await assertRefused(await hs(TEST_SECRET, rest), `missing ${claim}`)
      }
    })
  })

  describe('token types and bindings', () => {
    test('a refresh token is not an access token on a protected route', async () => {
      const { refresh_token } = await login(t, 'root@example.com')
      assert.equal((await me(refresh_token)).statusCode, 401)
      assert.equal((await offline(refresh_token)).statusCode, 401)
      // Nor an offline token of the same administrator.
      const { access_token } = await login(t, 'root@example.com')
      const off = (await offline(access_token)).json().offline_token as string
      assert.equal((await me(off)).statusCode, 401)
    })

    test('an offline token for event 2 does not use an event-1 ticket; one for event 1 does', async () => {
      const issue = async (email: string, event_id: number) => {
        const { access_token } = await login(t, email, 'operator')
        const res = await t.request({
          method: 'POST',
          url: '/tokens/offline',
          token: access_token,
          payload: { event_id },
        })
        assert.equal(res.statusCode, 200, res.body)
        return res.json().offline_token as string
      }
      const event2 = await issue('op2@example.com', 2)
      const event1 = await issue('op@example.com', 1)
      const { transfer_uid } = await newTransfer(t, keys.write, await newTicketType(t, keys.write))
      const use = (token: string) => t.request({ method: 'POST', url: `/tickets/${transfer_uid}/use`, token })
      assert.equal((await use(event2)).statusCode, 403)
      const batch = await t.request({
        method: 'POST',
        url: '/tickets/use-batch',
        token: event2,
        payload: { scans: [{ transfer_uid, used_at: new Date(t.clock.now()).toISOString() }] },
      })
      assert.equal(batch.json().results[0].status, 'FORBIDDEN')
      // The event-2 token cannot get an event-1 offline token either.
      assert.equal((await offline(event2)).statusCode, 401)
      assert.equal((await use(event1)).statusCode, 200)
    })

    test('a replayed rotated refresh token is refused and ends the whole family', async () => {
      const first = await login(t, 'ev1@example.com')
      const refresh = (refresh_token: string) =>
        t.request({ method: 'POST', url: '/auth/refresh', payload: { refresh_token } })
      const rotated = await refresh(first.refresh_token)
      assert.equal(rotated.statusCode, 200)
      assert.equal((await refresh(first.refresh_token)).statusCode, 401, 'replay')
      assert.equal((await verifyToken(t, first.refresh_token)).valid, false)
      assert.equal((await refresh(rotated.json().refresh_token)).statusCode, 401, 'the family is revoked')
    })

    test('a refresh token issued before a password reset is refused afterwards', async () => {
      const before = await login(t, 'ev1@example.com')
      assert.equal((await verifyToken(t, before.refresh_token)).valid, true)
      const sent = await t.request({
        method: 'POST',
        url: '/admin/password-reset/email-send',
        payload: { email: 'ev1@example.com' },
      })
      assert.equal(sent.statusCode, 200)
      const resetToken = await waitFor(() => {
        const mail = outboxMail(t).find((m) => m.to === 'ev1@example.com')
        return mail && /\/admin\/password-reset\/([A-Za-z0-9_-]+)/.exec(mail.text)?.[1]
      })
      const confirmed = await t.request({
        method: 'POST',
        url: `/admin/password-reset/${resetToken}`,
        payload: { new_password: 'a-brand-new-passw0rd' },
      })
      assert.equal(confirmed.statusCode, 200, confirmed.body)
      const res = await t.request({
        method: 'POST',
        url: '/auth/refresh',
        payload: { refresh_token: before.refresh_token },
      })
      assert.equal(res.statusCode, 401)
      assert.deepEqual(await verifyToken(t, before.refresh_token), { valid: false, claims: null })
      // The new password signs in.
      await login(t, 'ev1@example.com', 'admin', 'a-brand-new-passw0rd')
    })
  })
})

const PREVIOUS = 'previous-secret-still-verifying-32-bytes!'

forEachBackend(
  httpBackends,
  'token attacks during a key rotation: kid selects among the service keys only',
  (ctx) => {
    let t: TestApp
    let real: JWTPayload
    const now = () => Math.floor(t.clock.now() / 1000)
    const fresh = (): JWTPayload => ({ ...real, iat: now(), exp: now() + 600 })
    before(async () => {
      t = ctx()
      await t.seed({
        administrators: [
          { email: 'root@example.com', password: 's3cret-pass', role: 'superadmin', event_ids: [] },
        ],
      })
      real = decodeJwt((await login(t, 'root@example.com')).access_token)
    })
    const verdict = async (token: string) => {
      const verified = await verifyToken(t, token)
      const me = await t.request({ method: 'GET', url: '/admin/me', token })
      return { valid: verified.valid as boolean, me: me.statusCode }
    }

    test('control: a token of the previous secret, named by its kid, still verifies', async () => {
      assert.deepEqual(await verdict(await hs(PREVIOUS, fresh(), { kid: keyId(PREVIOUS) })), {
        valid: true,
        me: 200,
      })
    })

    test("another key, alg none or HS512 under the previous secret's kid are refused", async () => {
      const kid = keyId(PREVIOUS)
      const refused = { valid: false, me: 401 }
      assert.deepEqual(
        await verdict(await hs('attacker-secret-of-at-least-32-bytes!!', fresh(), { kid })),
        refused,
      )
      assert.deepEqual(await verdict(`${b64({ alg: 'none', kid })}.${b64(fresh())}.`), refused)
      assert.deepEqual(await verdict(await hs(PREVIOUS, fresh(), { kid }, 'HS512')), refused)
      // A retired secret (neither current nor previous) is refused whatever kid it claims.
      const retired = 'retired-secret-no-longer-listed-32-bytes'
      assert.deepEqual(await verdict(await hs(retired, fresh(), { kid: keyId(retired) })), refused)
      assert.deepEqual(await verdict(await hs(retired, fresh(), { kid })), refused)
    })
  },
  { JWT_PREVIOUS_SECRETS: PREVIOUS },
)
