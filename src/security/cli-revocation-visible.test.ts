import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { login, STANDARD_SEED, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { backends, eachBackend } from '../../test/helpers/backends.js'
import { startAppWithCli, wristband } from '../../test/helpers/cli.js'
import { until } from '../../test/helpers/until.js'

/**
 * A revocation written by the command line (another process on the same database)
 * reaches a running instance, which used to answer `valid: true` for the revoked refresh tokens until
 * it restarted. The instance reads new `revoked_tokens` rows from a cursor every REVOCATION_POLL_MS
 * (1 s by default); with Redis the command line also publishes on the revocation feed.
 */
eachBackend(backends, 'CLI revocations reach a running instance', (backend) => {
  let t: TestApp
  let env: Record<string, string>
  let close = async () => {}
  before(async () => {
    ;({ t, env, close } = await startAppWithCli(backend))
    await t.seed(STANDARD_SEED)
  })
  after(() => close())

  const cases: [string, string[], Record<string, string>][] = [
    ['admin disable', ['admin', 'disable', '--email', 'ev1@example.com'], {}],
    [
      'admin reset-password',
      ['admin', 'reset-password', '--email', 'root@example.com', '--password-stdin'],
      {},
    ],
  ]
  for (const [name, args, extra] of cases) {
    test(`${name} in another process: /tokens/verify refuses the revoked refresh token (polled)`, async () => {
      const email = args[3]!
      const session = await login(t, email)
      assert.equal((await verifyToken(t, session.refresh_token)).valid, true)
      const run = await wristband(args, { ...env, ...extra }, 'a-new-password-1\n')
      assert.equal(run.code, 0, run.stderr)
      await until(
        `${name}: the running instance refuses the token`,
        async () => !(await verifyToken(t, session.refresh_token)).valid,
      )
      // The account's token generation ended with its sessions (docs/security.md, "Token generations (F2)"): its access tokens too.
      await until(
        `${name}: the running instance refuses the access token`,
        async () => !(await verifyToken(t, session.access_token)).valid,
      )
    })
  }

  test('a command line without Redis still reaches an instance that has it (the database cursor)', async () => {
    const { REDIS_URL: _unused, ...withoutRedis } = env
    await wristband(['admin', 'enable', '--email', 'ev1@example.com'], env)
    const session = await login(t, 'ev1@example.com')
    assert.equal((await verifyToken(t, session.refresh_token)).valid, true)
    const run = await wristband(['admin', 'disable', '--email', 'ev1@example.com'], withoutRedis)
    assert.equal(run.code, 0, run.stderr)
    await until(
      'the running instance refuses the token',
      async () => !(await verifyToken(t, session.refresh_token)).valid,
    )
  })
})
