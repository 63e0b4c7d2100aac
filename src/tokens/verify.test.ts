import assert from 'node:assert/strict'
import { createHmac, randomBytes } from 'node:crypto'
import { before, test } from 'node:test'
import { createSigner } from 'fast-jwt'
import {
  forEachBackend,
  login,
  logout,
  STANDARD_SEED,
  TEST_SECRET,
  type TestApp,
  verifyToken,
} from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { BASELINE_SCOPES } from '../identities/grants.js'
import { JwtCodec } from './jwt.js'

const PREVIOUS_SECRET = 'an-earlier-secret-that-is-at-least-32-bytes'
const INVALID = { valid: false, claims: null }

const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url')

forEachBackend(
  httpBackends,
  'POST /tokens/verify',
  (ctx) => {
    let t: TestApp
    let claims: Record<string, unknown>
    let token: string
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
      token = (await login(t, 'ev1@example.com')).access_token
      claims = (await verifyToken(t, token)).claims as Record<string, unknown>
    })

    /** Signs `payload` the way an attacker would: with chosen algorithm and key, no help from the service. */
    function forge(
      payload: Record<string, unknown>,
      key = TEST_SECRET,
      algorithm: 'HS256' | 'HS512' = 'HS256',
    ) {
      return createSigner({ key, algorithm })(payload)
    }
    const now = () => Math.floor(t.clock.now() / 1000)
    const good = (): Record<string, unknown> => ({
      ...claims,
      jti: randomBytes(18).toString('base64url'),
      iat: now(),
      exp: now() + 600,
    })

    test('a valid access token: its claims, including type', async () => {
      const res = await verifyToken(t, token)
      assert.equal(res.valid, true)
      assert.equal(res.claims?.type, 'access')
      assert.equal(res.claims?.role, 'admin')
      for (const k of ['sub', 'jti', 'iat', 'exp', 'aud', 'iss', 'event_ids', 'permissions'])
        assert.ok(k in (res.claims ?? {}), `claim ${k}`)
      assert.equal(
        (await verifyToken(t, forge(good()))).valid,
        true,
        'the forge helper itself makes good tokens',
      )
    })

    test('a tampered payload is invalid', async () => {
      const [h, , s] = token.split('.')
      const tampered = `${h}.${b64({ ...claims, permissions: { '*': ['billing:manage'] } })}.${s}`
      assert.deepEqual(await verifyToken(t, tampered), INVALID)
    })

    test('a token signed with another secret is invalid', async () => {
      assert.deepEqual(
        await verifyToken(t, forge(good(), 'another-secret-of-at-least-32-bytes-long')),
        INVALID,
      )
    })

    test('alg none is refused, with or without a signature', async () => {
      const header = b64({ alg: 'none', typ: 'JWT' })
      const body = b64(good())
      assert.deepEqual(await verifyToken(t, `${header}.${body}.`), INVALID)
      const sig = createHmac('sha256', TEST_SECRET).update(`${header}.${body}`).digest('base64url')
      assert.deepEqual(await verifyToken(t, `${header}.${body}.${sig}`), INVALID)
    })

    test('HS512 signed with the very same secret is refused', async () => {
      assert.deepEqual(await verifyToken(t, forge(good(), TEST_SECRET, 'HS512')), INVALID)
    })

    test('wrong aud or iss is invalid; missing ones too', async () => {
      assert.deepEqual(await verifyToken(t, forge({ ...good(), aud: 'another-service' })), INVALID)
      assert.deepEqual(await verifyToken(t, forge({ ...good(), iss: 'another-issuer' })), INVALID)
      const { aud: _a, ...noAud } = good()
      assert.deepEqual(await verifyToken(t, forge(noAud)), INVALID)
      const { iss: _i, ...noIss } = good()
      assert.deepEqual(await verifyToken(t, forge(noIss)), INVALID)
    })

    test('missing exp or type is invalid', async () => {
      const { exp: _e, ...noExp } = good()
      assert.deepEqual(await verifyToken(t, forge(noExp)), INVALID)
      const { type: _t, ...noType } = good()
      assert.deepEqual(await verifyToken(t, forge(noType)), INVALID)
    })

    test('malformed strings are invalid, never an error', async () => {
      for (const s of ['', 'abc', 'a.b', 'a.b.c', '...', `${token}.x`, '\u0000', 'é.é.é', 'Bearer x', 'wb_x'])
        assert.deepEqual(await verifyToken(t, s), INVALID, JSON.stringify(s))
    })

    test('a token signed with a previous secret (JWT_PREVIOUS_SECRETS) still verifies', async () => {
      const old = new JwtCodec({
        secret: PREVIOUS_SECRET,
        previousSecrets: [],
        audience: t.config.JWT_AUDIENCE,
        issuer: t.config.JWT_ISSUER,
        clock: t.clock,
      })
      const { jti: _j, iat: _i, exp: _e, aud: _a, iss: _s, ...grant } = claims
      const res = await verifyToken(t, old.issue(grant, 600).token)
      assert.equal(res.valid, true)
      assert.equal(res.claims?.sub, claims.sub)
    })

    test('a revoked refresh token is invalid', async () => {
      const pair = await login(t, 'ev1@example.com')
      assert.equal((await verifyToken(t, pair.refresh_token)).valid, true)
      const out = await logout(t, pair.access_token, pair.refresh_token)
      assert.equal(out.statusCode, 200)
      assert.deepEqual(await verifyToken(t, pair.refresh_token), INVALID)
    })

    test('superadmin: role admin, event_ids [] and permissions {"*": admin scopes}', async () => {
      const root = await verifyToken(t, (await login(t, 'root@example.com')).access_token)
      assert.equal(root.claims?.role, 'admin')
      assert.deepEqual(root.claims?.event_ids, [])
      assert.deepEqual(root.claims?.permissions, { '*': [...BASELINE_SCOPES.admin] })
    })

    // Moves the suite's clock forward, so it runs last.
    test('an expired token is invalid', async () => {
      const fresh = (await login(t, 'ev1@example.com')).access_token
      t.clock.advance(15 * 60_000 - 5_000)
      assert.equal((await verifyToken(t, fresh)).valid, true, 'still valid just before exp')
      t.clock.advance(10_000)
      assert.deepEqual(await verifyToken(t, fresh), INVALID)
    })
  },
  { JWT_PREVIOUS_SECRETS: PREVIOUS_SECRET },
)
