import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import * as client from 'openid-client'
import { login, nextAddress, STANDARD_SEED, startApp, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { freePort } from '../../test/helpers/processes.js'

/**
 * The standard endpoints as a standard client uses them: openid-client (panva's certified OAuth
 * library) discovers the metadata of a listening instance (RFC 8414), introspects (RFC 7662) with a
 * verify credential and revokes (RFC 7009), over a real socket.
 */
eachBackend(httpBackends, 'openid-client against the standard endpoints', (backend) => {
  let t: TestApp
  let issuer: URL
  let credential: string
  before(async () => {
    const port = await freePort()
    // The issuer is PUBLIC_BASE_URL: the address a client discovers it at.
    t = await startApp(backend, { PUBLIC_BASE_URL: `http://127.0.0.1:${port}` })
    await t.seed(STANDARD_SEED)
    await t.app.listen({ host: '127.0.0.1', port })
    issuer = new URL(`http://127.0.0.1:${port}`)
    const admin = (await login(t, 'ev1@example.com')).access_token
    const created = await t.request({
      method: 'POST',
      url: '/tokens/api-key',
      token: admin,
      payload: { event_id: 1, name: `resource server ${nextAddress()}`, scopes: ['tokens:verify'] },
    })
    assert.equal(created.statusCode, 200, created.body)
    credential = created.json().api_key
  })
  after(async () => {
    await t?.close()
  })

  /** The resource server's configuration: the verify credential sent as a Bearer token. */
  const resourceServer = (key: string) =>
    client.discovery(
      issuer,
      'resource-server',
      undefined,
      (_as, _client, _body, headers) => headers.set('authorization', `Bearer ${key}`),
      { algorithm: 'oauth2', execute: [client.allowInsecureRequests] },
    )

  test('discovery finds both endpoints under the issuer', async () => {
    const config = await resourceServer(credential)
    const meta = config.serverMetadata()
    assert.equal(meta.issuer, issuer.href.replace(/\/$/, ''))
    assert.equal(meta.introspection_endpoint, `${meta.issuer}/oauth2/introspect`)
    assert.equal(meta.revocation_endpoint, `${meta.issuer}/oauth2/revoke`)
    assert.deepEqual(meta.revocation_endpoint_auth_methods_supported, ['none'])
  })

  test('tokenIntrospection: a good access token is active with its claims; a refresh token is not', async () => {
    const config = await resourceServer(credential)
    const pair = await login(t, 'ev1@example.com')
    const active = await client.tokenIntrospection(config, pair.access_token)
    assert.equal(active.active, true)
    assert.equal(active.token_type, 'bearer')
    assert.equal(active.type, 'access')
    assert.equal(typeof active.sub, 'string')
    assert.equal(typeof active.exp, 'number')
    const refresh = await client.tokenIntrospection(config, pair.refresh_token, {
      token_type_hint: 'refresh_token',
    })
    assert.deepEqual({ ...refresh }, { active: false })
  })

  test('tokenIntrospection without a verify credential is refused (401)', async () => {
    const config = await resourceServer('wb_not-a-credential')
    const { access_token } = await login(t, 'ev1@example.com')
    await assert.rejects(client.tokenIntrospection(config, access_token), (err: { status?: number }) => {
      assert.equal(err.status, 401)
      return true
    })
  })

  test('tokenRevocation with no client authentication; introspection then says inactive', async () => {
    const holder = await client.discovery(issuer, 'app', undefined, client.None(), {
      algorithm: 'oauth2',
      execute: [client.allowInsecureRequests],
    })
    const config = await resourceServer(credential)
    const pair = await login(t, 'ev1@example.com')
    await client.tokenRevocation(holder, pair.access_token, { token_type_hint: 'access_token' })
    await client.tokenRevocation(holder, pair.refresh_token)
    await client.tokenRevocation(holder, 'never-issued')
    assert.deepEqual({ ...(await client.tokenIntrospection(config, pair.access_token)) }, { active: false })
    const refreshed = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: pair.refresh_token },
    })
    assert.equal(refreshed.statusCode, 401, 'the revoked refresh token ended its session')
  })
})
