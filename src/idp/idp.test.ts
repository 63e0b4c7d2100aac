import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose'
import { forEachBackend, STANDARD_SEED, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

interface Key {
  kid: string
  alg: 'RS256' | 'ES256'
  privateKey: CryptoKey
  jwk: JWK
}

async function makeKey(kid: string, alg: 'RS256' | 'ES256'): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair(alg)
  return { kid, alg, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } }
}

/**
 * A real OpenID provider surface over HTTP: issuer A publishes a discovery document, issuer B only a
 * key set (configured by jwks_uri). The served key sets can be changed to rotate keys.
 */
const keys = {
  a1: await makeKey('a-1', 'RS256'),
  a2: await makeKey('a-2', 'RS256'),
  b1: await makeKey('b-1', 'ES256'),
  stranger: await makeKey('a-1', 'RS256'), // same kid as a1, different key
}
const served: { a: Key[]; b: Key[] } = { a: [keys.a1], b: [keys.b1] }
const hits = { discovery: 0, a: 0, b: 0 }
const server = createServer((req, res) => {
  const json = (body: unknown) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body))
  if (req.url === '/a/.well-known/openid-configuration') {
    hits.discovery++
    return json({
      issuer: ISSUER_A,
      jwks_uri: `${BASE}/a/jwks`,
      id_token_signing_alg_values_supported: ['RS256'],
    })
  }
  if (req.url === '/a/jwks') {
    hits.a++
    return json({ keys: served.a.map((k) => k.jwk) })
  }
  if (req.url === '/b/keys') {
    hits.b++
    return json({ keys: served.b.map((k) => k.jwk) })
  }
  res.writeHead(404).end()
})
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
after(() => new Promise<void>((resolve) => server.close(() => resolve())))
const BASE = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
const ISSUER_A = `${BASE}/a`
const ISSUER_B = `${BASE}/b`
const ISSUER_DOWN = 'http://127.0.0.1:9/down'

const env = {
  IDP_ISSUERS: JSON.stringify([
    { issuer: ISSUER_A, audience: 'wristband-app' },
    { issuer: ISSUER_B, audience: 'wristband-b', jwks_uri: `${ISSUER_B}/keys` },
    { issuer: ISSUER_DOWN, audience: 'x', jwks_uri: `${ISSUER_DOWN}/keys` },
  ]),
  // Tests rotate keys right after a fetch; production keeps the 30-second cooldown.
  IDP_JWKS_COOLDOWN_SECONDS: '0',
  IDP_HTTP_TIMEOUT_SECONDS: '2',
}

let subjectCounter = 0
const nextSubject = () => `subject-${++subjectCounter}-${Math.random().toString(36).slice(2, 8)}`

forEachBackend(
  httpBackends,
  'POST /auth/login/idp',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
    })

    interface TokenOptions {
      key?: Key
      iss?: string
      aud?: string
      sub?: string
      /** Seconds relative to the app's clock. */
      exp?: number
      nbf?: number
      claims?: Record<string, unknown>
    }
    function idToken(o: TokenOptions = {}): Promise<string> {
      const key = o.key ?? keys.a1
      const now = Math.floor(t.clock.now() / 1000)
      const jwt = new SignJWT(o.claims ?? {})
        .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT' })
        .setIssuer(o.iss ?? ISSUER_A)
        .setAudience(o.aud ?? 'wristband-app')
        .setSubject(o.sub ?? nextSubject())
        .setIssuedAt(now)
        .setExpirationTime(now + (o.exp ?? 300))
      if (o.nbf !== undefined) jwt.setNotBefore(now + o.nbf)
      return jwt.sign(key.privateKey)
    }
    const signIn = (id_token: string, headers: Record<string, string> = {}) =>
      t.request({ method: 'POST', url: '/auth/login/idp', payload: { id_token }, headers })
    async function consumerId(res: { json(): { access_token: string } }): Promise<string> {
      const { claims } = await verifyToken(t, res.json().access_token)
      assert.equal(claims.role, 'consumer')
      return claims.sub
    }

    test('an RS256 token of a provider found by discovery signs in a new consumer', async () => {
      const res = await signIn(
        await idToken({ claims: { email: 'Ida@Example.com', email_verified: true, given_name: 'Ida' } }),
      )
      assert.equal(res.statusCode, 200)
      assert.equal(res.json().token_type, 'bearer')
      const me = await t.request({ method: 'GET', url: '/consumers/me', token: res.json().access_token })
      assert.equal(me.json().email, 'ida@example.com')
      assert.equal(me.json().first_name, 'Ida')
      assert.equal(me.json().phone, null)
      assert.equal(me.json().has_password, false)
      assert.deepEqual(me.json().identity_providers, [ISSUER_A])
      assert.ok(hits.discovery >= 1)
    })

    test('the same provider account signs in the same consumer again', async () => {
      const sub = nextSubject()
      const first = await consumerId(await signIn(await idToken({ sub })))
      const second = await consumerId(await signIn(await idToken({ sub })))
      assert.equal(first, second)
      const other = await consumerId(
        await signIn(await idToken({ key: keys.b1, iss: ISSUER_B, aud: 'wristband-b', sub })),
      )
      assert.notEqual(other, first, 'the same subject at another issuer is another account')
    })

    test('an ES256 token of a provider configured by jwks_uri is accepted', async () => {
      const res = await signIn(await idToken({ key: keys.b1, iss: ISSUER_B, aud: 'wristband-b' }))
      assert.equal(res.statusCode, 200)
      assert.ok(hits.b >= 1)
    })

    test('a provider-verified e-mail links the existing consumer with that address', async () => {
      const seeded = await t.db.db
        .selectFrom('customers')
        .select('id')
        .where('email', '=', 'holder@example.com')
        .executeTakeFirstOrThrow()
      const res = await signIn(
        await idToken({ claims: { email: 'HOLDER@example.com', email_verified: true } }),
      )
      assert.equal(res.statusCode, 200)
      assert.equal(await consumerId(res), String(seeded.id))
      const me = await t.request({ method: 'GET', url: '/consumers/me', token: res.json().access_token })
      assert.deepEqual(me.json().identity_providers, [ISSUER_A])
      assert.equal(me.json().phone, '+4915100000001')
    })

    test('an unverified e-mail does not link; a new consumer is created', async () => {
      await t.seed({ customers: [{ phone: '+4915100000051', email: 'unverified@example.com' }] })
      const seeded = await t.db.db
        .selectFrom('customers')
        .select('id')
        .where('email', '=', 'unverified@example.com')
        .executeTakeFirstOrThrow()
      for (const email_verified of [false, 'false', undefined]) {
        const res = await signIn(
          await idToken({ claims: { email: 'unverified@example.com', email_verified } }),
        )
        assert.equal(res.statusCode, 200)
        assert.notEqual(await consumerId(res), String(seeded.id))
      }
    })

    test('an address the consumer typed in itself is never linked', async () => {
      await t.seed({ customers: [{ phone: '+4915100000052', email: 'victim@example.com' }] })
      await t.db.db
        .updateTable('customers')
        .set({ email_self_asserted: 1 })
        .where('phone', '=', '+4915100000052')
        .execute()
      const res = await signIn(
        await idToken({ claims: { email: 'victim@example.com', email_verified: true } }),
      )
      assert.equal(res.statusCode, 200)
      const me = await t.request({ method: 'GET', url: '/consumers/me', token: res.json().access_token })
      assert.equal(me.json().phone, null, 'a new consumer, not the one who claimed the address')
    })

    test('a consumer created by one provider is linked by a second provider vouching for the same e-mail', async () => {
      const email = `both-${nextSubject()}@example.com`
      const viaA = await consumerId(await signIn(await idToken({ claims: { email, email_verified: true } })))
      const viaB = await consumerId(
        await signIn(
          await idToken({
            key: keys.b1,
            iss: ISSUER_B,
            aud: 'wristband-b',
            claims: { email, email_verified: 'true' },
          }),
        ),
      )
      assert.equal(viaA, viaB)
    })

    test('of concurrent first sign-ins of one account all succeed with one consumer', async () => {
      const sub = nextSubject()
      const answers = await Promise.all(Array.from({ length: 5 }, async () => signIn(await idToken({ sub }))))
      for (const res of answers) assert.equal(res.statusCode, 200)
      const ids = new Set(await Promise.all(answers.map((r) => consumerId(r))))
      assert.equal(ids.size, 1)
      const links = await t.db.db
        .selectFrom('customer_identities')
        .select('customer_id')
        .where('subject', '=', sub)
        .execute()
      assert.equal(links.length, 1)
    })

    test('a wrong audience is 401', async () => {
      const res = await signIn(await idToken({ aud: 'someone-else' }))
      assert.equal(res.statusCode, 401)
      assert.equal(res.headers['www-authenticate'], 'Bearer')
      const crossed = await signIn(await idToken({ key: keys.b1, iss: ISSUER_B, aud: 'wristband-app' }))
      assert.equal(crossed.statusCode, 401, "issuer A's audience is not issuer B's")
    })

    test('a token signed by another key under a published kid is 401', async () => {
      assert.equal((await signIn(await idToken({ key: keys.stranger }))).statusCode, 401)
    })

    test('a kid the provider does not publish is 401, after looking again', async () => {
      const before = hits.a
      const res = await signIn(await idToken({ key: { ...keys.stranger, kid: 'unpublished' } }))
      assert.equal(res.statusCode, 401)
      assert.ok(hits.a > before, 'the key set was fetched again for the unknown kid')
    })

    test('an expired token is 401 (it worked before it expired)', async () => {
      const token = await idToken({ exp: 60 })
      assert.equal((await signIn(token)).statusCode, 200)
      t.clock.advance(2 * 60_000)
      assert.equal((await signIn(token)).statusCode, 401)
    })

    test('a token not yet valid (nbf) is 401', async () => {
      assert.equal((await signIn(await idToken({ nbf: 600, exp: 1200 }))).statusCode, 401)
    })

    test('an unknown issuer, an issuer claim on the wrong key, a malformed token: 401', async () => {
      assert.equal((await signIn(await idToken({ iss: 'https://evil.example.com' }))).statusCode, 401)
      assert.equal((await signIn(await idToken({ iss: ISSUER_B, aud: 'wristband-b' }))).statusCode, 401)
      assert.equal((await signIn('not.a.jwt')).statusCode, 401)
    })

    test('HS256 and alg none are refused even with a valid-looking payload', async () => {
      const now = Math.floor(t.clock.now() / 1000)
      const payload = { iss: ISSUER_A, aud: 'wristband-app', sub: nextSubject(), iat: now, exp: now + 300 }
      const hs = await new SignJWT(payload)
        .setProtectedHeader({ alg: 'HS256', kid: 'a-1' })
        .sign(new TextEncoder().encode('a-shared-secret-that-is-long-enough-32b'))
      assert.equal((await signIn(hs)).statusCode, 401)
      const none = `${Buffer.from(JSON.stringify({ alg: 'none' })).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.`
      assert.equal((await signIn(none)).statusCode, 401)
    })

    test('key rotation: a token under a newly published key is accepted, a retired key no longer', async () => {
      const oldToken = await idToken({ key: keys.a1 })
      assert.equal((await signIn(oldToken)).statusCode, 200)
      served.a = [keys.a2]
      const before = hits.a
      assert.equal((await signIn(await idToken({ key: keys.a2 }))).statusCode, 200)
      assert.ok(hits.a > before, 'the unknown kid made the service fetch the key set again')
      assert.equal((await signIn(await idToken({ key: keys.a1 }))).statusCode, 401)
      served.a = [keys.a1]
    })

    test('an unreachable provider is 503', async () => {
      const { privateKey } = keys.a1
      const now = Math.floor(t.clock.now() / 1000)
      const token = await new SignJWT({})
        .setProtectedHeader({ alg: 'RS256', kid: 'a-1' })
        .setIssuer(ISSUER_DOWN)
        .setAudience('x')
        .setSubject('s')
        .setIssuedAt(now)
        .setExpirationTime(now + 300)
        .sign(privateKey)
      const res = await signIn(token)
      assert.equal(res.statusCode, 503)
    })

    test('validation and the limit of 30 per minute', async () => {
      const missing = await t.request({ method: 'POST', url: '/auth/login/idp', payload: {} })
      assert.equal(missing.statusCode, 422)
      assert.deepEqual(missing.json().detail[0].loc, ['body', 'id_token'])
      const extra = await t.request({
        method: 'POST',
        url: '/auth/login/idp',
        payload: { id_token: 'x', nonce: 'y' },
      })
      assert.equal(extra.json().detail[0].type, 'extra_forbidden')
      const headers = { 'x-forwarded-for': '198.51.100.70' }
      for (let i = 0; i < 30; i++) assert.equal((await signIn('x', headers)).statusCode, 401)
      assert.equal((await signIn('x', headers)).statusCode, 429)
    })
  },
  env,
)
