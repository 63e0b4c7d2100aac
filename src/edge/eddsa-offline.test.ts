import assert from 'node:assert/strict'
import { createPrivateKey } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, SignJWT } from 'jose'
import { login, STANDARD_SEED, startApp, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

const offlineToken = async (t: TestApp) => {
  const op = (await login(t, 'op@example.com', 'operator')).access_token
  const res = await t.request({ method: 'POST', url: '/tokens/offline', token: op, payload: { event_id: 1 } })
  assert.equal(res.statusCode, 200, res.body)
  return res.json().offline_token as string
}
describe('offline tokens signed with the edge key (OFFLINE_TOKEN_ALG=EdDSA)', () => {
  let t: TestApp
  before(async () => {
    t = await startApp(httpBackends[0]!, { OFFLINE_TOKEN_ALG: 'EdDSA' })
    await t.seed(STANDARD_SEED)
  })
  after(() => t.close())

  test('a device checks the offline token with the JWK Set alone; /tokens/verify and the guards accept it', async () => {
    const token = await offlineToken(t)
    const jwks = (await t.request({ method: 'GET', url: '/.well-known/jwks.json' })).json()
    assert.deepEqual(decodeProtectedHeader(token), {
      alg: 'EdDSA',
      typ: 'wb-offline+jwt',
      kid: jwks.keys[0].kid,
    })
    const { payload } = await jwtVerify(token, createLocalJWKSet(jwks), {
      algorithms: ['EdDSA'],
      audience: 'wristband',
      issuer: 'wristband',
      currentDate: new Date(t.clock.now()),
    })
    assert.equal(payload.type, 'offline')
    assert.equal(payload.event_id, 1)
    const answer = await verifyToken(t, token)
    assert.equal(answer.valid, true)
    assert.equal(answer.claims.jti, payload.jti)
    const feed = await t.request({ method: 'GET', url: '/events/1/scan-sync', token })
    assert.equal(feed.statusCode, 200)
    // Access tokens stay HS256.
    const access = (await login(t, 'op@example.com', 'operator')).access_token
    assert.equal(decodeProtectedHeader(access).alg, 'HS256')
    assert.equal((await verifyToken(t, access)).valid, true)
  })

  test('the edge key cannot mint access tokens: an EdDSA token of another type is refused', async () => {
    const key = createPrivateKey(fs.readFileSync(path.join(t.config.DATA_DIR, 'edge-key.pem'), 'utf8'))
    const jwks = (await t.request({ method: 'GET', url: '/.well-known/jwks.json' })).json()
    const now = Math.floor(t.clock.now() / 1000)
    const forged = await new SignJWT({
      type: 'access',
      sub: '1',
      role: 'admin',
      event_ids: [],
      permissions: { '*': ['events:manage'] },
      jti: 'edge-minted',
    })
      .setProtectedHeader({ alg: 'EdDSA', kid: jwks.keys[0].kid, typ: 'wb-offline+jwt' })
      .setIssuedAt(now)
      .setExpirationTime(now + 600)
      .setAudience('wristband')
      .setIssuer('wristband')
      .sign(key)
    assert.deepEqual(await verifyToken(t, forged), { valid: false, claims: null })
    assert.equal((await t.request({ method: 'GET', url: '/admin/me', token: forged })).statusCode, 401)
  })

  test('an EdDSA offline token signed by another key is refused', async () => {
    const token = await offlineToken(t)
    const [h, p] = token.split('.')
    const other = await new SignJWT(JSON.parse(Buffer.from(p!, 'base64url').toString()))
      .setProtectedHeader(JSON.parse(Buffer.from(h!, 'base64url').toString()))
      .sign((await import('node:crypto')).generateKeyPairSync('ed25519').privateKey)
    assert.equal((await verifyToken(t, other)).valid, false)
  })
})

describe('offline tokens by default (HS256, as the specification fixes)', () => {
  let t: TestApp
  before(async () => {
    t = await startApp(httpBackends[0]!)
    await t.seed(STANDARD_SEED)
  })
  after(() => t.close())

  test('an offline token is HS256 and verifies as before', async () => {
    const token = await offlineToken(t)
    assert.equal(decodeProtectedHeader(token).alg, 'HS256')
    assert.equal((await verifyToken(t, token)).valid, true)
  })

  test('with OFFLINE_TOKEN_ALG=HS256 an EdDSA offline token signed with the edge key is refused', async () => {
    const key = createPrivateKey(fs.readFileSync(path.join(t.config.DATA_DIR, 'edge-key.pem'), 'utf8'))
    const jwks = (await t.request({ method: 'GET', url: '/.well-known/jwks.json' })).json()
    const hs = await offlineToken(t)
    const claims = JSON.parse(Buffer.from(hs.split('.')[1]!, 'base64url').toString())
    for (const typ of ['wb-offline+jwt', 'JWT']) {
      const edgeSigned = await new SignJWT(claims)
        .setProtectedHeader({ alg: 'EdDSA', kid: jwks.keys[0].kid, typ })
        .sign(key)
      assert.deepEqual(await verifyToken(t, edgeSigned), { valid: false, claims: null }, typ)
      assert.equal(
        (await t.request({ method: 'GET', url: '/events/1/scan-sync', token: edgeSigned })).statusCode,
        401,
      )
    }
  })
})
