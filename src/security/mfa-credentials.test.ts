import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { eventAdmin, forEachBackend, login, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { enrolMfa, freshMfaTokens } from '../../test/helpers/mfa.js'

/**
 * Audit of 2026-11-25 (docs/security.md): an administrator whose MFA was enabled created never-expiring
 * API keys, dashboard users, device and offline tokens with the password alone. While MFA is on, these
 * routes need an access token with a fresh `mfa_verified_at`: 403 `mfa_required` otherwise, nothing
 * created, the refusal audited as denied.
 */
const ADMIN = 'mfa-ev@example.com'
const ROOT = 'mfa-root@example.com'
// A one-hour window and access tokens that outlive it, so a stale verification is seen on a live token.
const env = { MFA_FRESHNESS_WINDOW_HOURS: '1', ACCESS_TOKEN_EXPIRE_MINUTES: '180' }

forEachBackend(
  httpBackends,
  'credential-creating routes need fresh MFA while it is on',
  (ctx) => {
    let t: TestApp
    const secrets: Record<string, string> = {}
    let operatorId = 0
    before(async () => {
      t = ctx()
      await t.seed(
        withStandardSeed({
          administrators: [
            eventAdmin(ADMIN),
            { email: ROOT, password: 's3cret-pass', role: 'superadmin', event_ids: [] },
          ],
        }),
      )
      secrets[ADMIN] = await enrolMfa(t, ADMIN)
      secrets[ROOT] = await enrolMfa(t, ROOT)
      operatorId = (
        await t.db.db
          .selectFrom('users')
          .select('id')
          .where('email', '=', 'op@example.com')
          .executeTakeFirstOrThrow()
      ).id
    })

    const passwordOnly = async (email: string) => (await login(t, email)).access_token
    const fresh = async (email: string) => (await freshMfaTokens(t, email, secrets[email]!)).access_token
    const count = async (table: 'event_clients' | 'dashboard_users') =>
      Number(
        (
          await t.db.db
            .selectFrom(table)
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      )
    const denials = async () =>
      (
        await t.db.db
          .selectFrom('audit_log')
          .select(['actor', 'detail'])
          .where('kind', '=', 'mfa_required')
          .where('outcome', '=', 'denied')
          .execute()
      ).map((r) => `${r.actor} ${JSON.parse(r.detail ?? '{}').route}`)

    function assertMfaRequired(res: LightMyRequestResponse, what: string) {
      assert.equal(res.statusCode, 403, `${what}: ${res.body}`)
      const body = res.json()
      assert.equal(body.error, 'mfa_required', what)
      assert.equal(typeof body.detail, 'string', what)
    }

    const createKey = (token: string) =>
      t.request({
        method: 'POST',
        url: '/tokens/api-key',
        token,
        payload: { event_id: 1, name: 'box office', scopes: ['api:read'] },
      })

    test('a password alone creates no API key for an MFA administrator', async () => {
      const keys = await count('event_clients')
      assertMfaRequired(await createKey(await passwordOnly(ADMIN)), 'password only')
      assert.equal(await count('event_clients'), keys, 'a key was created')
      const adminId = (
        await t.db.db
          .selectFrom('administrators')
          .select('id')
          .where('email', '=', ADMIN)
          .executeTakeFirstOrThrow()
      ).id
      assert.ok((await denials()).includes(`admin:${adminId} POST /tokens/api-key`), 'the refusal is audited')

      const token = await fresh(ADMIN)
      const created = await createKey(token)
      assert.equal(created.statusCode, 200, created.body)
      assert.equal(await count('event_clients'), keys + 1)
      // A verification older than MFA_FRESHNESS_WINDOW_HOURS is no longer enough.
      t.clock.advance(3600_000 + 1000)
      assertMfaRequired(await createKey(token), 'stale verification')
    })

    test('a password alone creates, changes or removes no dashboard user for an MFA superadmin', async () => {
      const plain = await passwordOnly(ROOT)
      const users = await count('dashboard_users')
      const create = (token: string) =>
        t.request({
          method: 'POST',
          url: '/admin/dashboard-users',
          token,
          payload: { username: 'mfa-partner', password: 'partner-pass', event_ids: [1] },
        })
      assertMfaRequired(await create(plain), 'create')
      assert.equal(await count('dashboard_users'), users)
      const token = await fresh(ROOT)
      const created = await create(token)
      assert.equal(created.statusCode, 201, created.body)
      const id = created.json().id as number

      const patch = (tk: string) =>
        t.request({
          method: 'PATCH',
          url: `/admin/dashboard-users/${id}`,
          token: tk,
          payload: { password: 'taken-over' },
        })
      const remove = (tk: string) =>
        t.request({ method: 'DELETE', url: `/admin/dashboard-users/${id}`, token: tk })
      assertMfaRequired(await patch(plain), 'change')
      assertMfaRequired(await remove(plain), 'remove')
      assert.equal(await count('dashboard_users'), users + 1)
      // Listing creates nothing: the password is enough.
      assert.equal(
        (await t.request({ method: 'GET', url: '/admin/dashboard-users', token: plain })).statusCode,
        200,
      )
      assert.equal((await patch(token)).statusCode, 200)
      assert.equal((await remove(token)).statusCode, 200)
    })

    test('a password alone creates no device token, offline token or device set-up code for an MFA administrator', async () => {
      const plain = await passwordOnly(ADMIN)
      const deviceToken = (token: string) =>
        t.request({ method: 'POST', url: '/devices/1/token', token, payload: { operator_id: operatorId } })
      const offlineToken = (token: string) =>
        t.request({ method: 'POST', url: '/tokens/offline', token, payload: { event_id: 1 } })
      const setupCode = (token: string) => t.request({ method: 'POST', url: '/devices/1/setup-code', token })
      assertMfaRequired(await deviceToken(plain), 'device token')
      assertMfaRequired(await offlineToken(plain), 'offline token')
      assertMfaRequired(await setupCode(plain), 'set-up code')
      const token = await fresh(ADMIN)
      assert.equal((await deviceToken(token)).statusCode, 200)
      assert.equal((await offlineToken(token)).statusCode, 200)
      assert.equal((await setupCode(token)).statusCode, 200)
    })

    test('operators, and administrators without MFA, are not asked for it', async () => {
      const op = (await login(t, 'op@example.com', 'operator')).access_token
      assert.equal(
        (await t.request({ method: 'POST', url: '/tokens/offline', token: op, payload: { event_id: 1 } }))
          .statusCode,
        200,
      )
      assert.equal((await createKey(await passwordOnly('ev1@example.com'))).statusCode, 200)
    })
  },
  env,
)
