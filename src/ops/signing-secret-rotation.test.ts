import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { login, STANDARD_SEED, startApp, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import type { Clock } from '../platform/clock.js'
import { JwtCodec, keyId } from '../tokens/jwt.js'

const OLD = 'old-signing-secret-0123456789abcdefghijklmnop'
const NEW = 'new-signing-secret-0123456789abcdefghijklmnop'

/**
 * Offline tokens have no HTTP route on this branch yet; one is signed the way TokenService.issueOffline
 * signs it, with the secret and clock of an instance.
 */
function offlineToken(secret: string, clock: Clock): string {
  const codec = new JwtCodec({
    secret,
    previousSecrets: [],
    audience: 'wristband',
    issuer: 'wristband',
    clock,
  })
  return codec.issue(
    {
      type: 'offline',
      sub: '1',
      role: 'operator',
      event_ids: [1],
      permissions: { '1': ['pos:sell'] },
      event_id: 1,
    },
    72 * 3600,
  ).token
}

function kidOf(token: string): string {
  return JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()).kid
}

async function refresh(t: TestApp, refreshToken: string) {
  return t.request({ method: 'POST', url: '/auth/refresh', payload: { refresh_token: refreshToken } })
}

eachBackend(httpBackends, 'signing-secret rotation on a fleet of two', (backend) => {
  let provisioned: ProvisionedBackend
  const fleet: { a?: TestApp; b?: TestApp } = {}
  let elapsed = 0

  /** Restarts one instance with other secrets, as a rolling deploy does; the backend stays. */
  async function restart(which: 'a' | 'b', secret: string, previous: string[] = []) {
    await fleet[which]?.close()
    const t = await startApp(
      backend,
      { JWT_SECRET: secret, JWT_PREVIOUS_SECRETS: previous.join(',') },
      provisioned,
    )
    t.clock.advance(elapsed)
    fleet[which] = t
    return t
  }
  function advance(ms: number) {
    elapsed += ms
    fleet.a?.clock.advance(ms)
    fleet.b?.clock.advance(ms)
  }

  before(async () => {
    provisioned = await backend.provision()
  })
  after(async () => {
    await fleet.a?.close()
    await fleet.b?.close()
    await provisioned?.dispose()
  })

  test('live tokens keep working through a rolling rotation; a removed secret is refused', async () => {
    // Before: both instances sign and verify with the old secret.
    let a = await restart('a', OLD)
    let b = await restart('b', OLD)
    await a.seed(STANDARD_SEED)
    const early = await login(a, 'ev1@example.com')
    const spare = await login(b, 'ev1@example.com')
    const offline = offlineToken(OLD, a.clock)
    assert.equal(kidOf(early.access_token), keyId(OLD))
    for (const t of [a, b]) {
      assert.equal((await verifyToken(t, early.access_token)).valid, true)
      assert.equal((await verifyToken(t, offline)).valid, true)
    }

    // Step 1: every instance learns the new secret as a verify-only key; nothing changes for tokens.
    a = await restart('a', OLD, [NEW])
    b = await restart('b', OLD, [NEW])
    assert.equal((await verifyToken(b, early.access_token)).valid, true)

    // Step 2: instances start signing with the new secret one at a time, keeping the old one to
    // verify. Mid-roll, each instance accepts what the other signs.
    a = await restart('a', NEW, [OLD])
    const fresh = await login(a, 'ev1@example.com')
    assert.equal(kidOf(fresh.access_token), keyId(NEW))
    assert.equal(
      (await verifyToken(b, fresh.access_token)).valid,
      true,
      'old-secret instance refuses a new-secret token',
    )
    assert.equal((await verifyToken(a, early.access_token)).valid, true)
    b = await restart('b', NEW, [OLD])
    for (const t of [a, b]) {
      assert.equal((await verifyToken(t, early.access_token)).valid, true, 'an access token was logged out')
      assert.equal((await verifyToken(t, offline)).valid, true, 'an offline token was logged out')
      assert.equal((await verifyToken(t, fresh.access_token)).valid, true)
    }
    // A refresh token signed with the old secret still refreshes, and gets new-secret tokens.
    const rotated = await refresh(b, early.refresh_token)
    assert.equal(rotated.statusCode, 200, rotated.body)
    const next = rotated.json()
    assert.equal(kidOf(next.access_token), keyId(NEW))
    assert.equal((await verifyToken(a, next.access_token)).valid, true)

    // They keep working until they expire, and no longer.
    advance(16 * 60_000)
    assert.equal(
      (await verifyToken(a, early.access_token)).valid,
      false,
      'an expired access token was accepted',
    )
    assert.equal((await verifyToken(a, offline)).valid, true)

    // Step 3: the old secret is removed from the list: what it signed is refused everywhere.
    a = await restart('a', NEW)
    b = await restart('b', NEW)
    const lateOld = offlineToken(OLD, a.clock)
    for (const t of [a, b]) {
      assert.equal((await verifyToken(t, offline)).valid, false, 'a token of a removed secret was accepted')
      assert.equal((await verifyToken(t, lateOld)).valid, false, 'a token of a removed secret was accepted')
    }
    assert.equal((await refresh(a, spare.refresh_token)).statusCode, 401)
    // What the new secret signed lives on.
    const again = await refresh(a, next.refresh_token)
    assert.equal(again.statusCode, 200, again.body)
    assert.equal((await verifyToken(b, again.json().access_token)).valid, true)
  })
})
