import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { generateSync } from 'otplib'
import { login, STANDARD_SEED, startApp, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'

const OLD = 'old-signing-secret-0123456789abcdefghijklmnop'
const NEW = 'new-signing-secret-0123456789abcdefghijklmnop'
const STEP_MS = 30_000

/** Moves an instance's clock `steps` time steps on, to just after a step boundary. */
function moveTo(t: TestApp, steps: number): number {
  t.clock.advance(steps * STEP_MS + STEP_MS - ((t.clock.now() + steps * STEP_MS) % STEP_MS) + 100)
  return t.clock.now()
}

async function verify(t: TestApp, email: string, secret: string, at: number) {
  const { access_token } = await login(t, email)
  const code = generateSync({ secret, epoch: Math.floor(at / 1000) })
  return t.request({ method: 'POST', url: '/admin/mfa/verify', token: access_token, payload: { code } })
}

eachBackend(httpBackends, 'MFA secrets across a signing-secret rotation', (backend) => {
  let provisioned: ProvisionedBackend
  let t: TestApp | undefined
  const secrets: Record<string, string> = {}

  const storedSecret = async (email: string) =>
    (
      await t!.db.db
        .selectFrom('administrators')
        .select('mfa_secret')
        .where('email', '=', email)
        .executeTakeFirstOrThrow()
    ).mfa_secret!

  async function deploy(secret: string, previous: string[] = []) {
    await t?.close()
    t = await startApp(backend, { JWT_SECRET: secret, JWT_PREVIOUS_SECRETS: previous.join(',') }, provisioned)
    return t
  }

  before(async () => {
    provisioned = await backend.provision()
    const first = await deploy(OLD)
    await first.seed(STANDARD_SEED)
    const at = moveTo(first, 0)
    for (const email of ['ev1@example.com', 'root@example.com']) {
      const { access_token } = await login(first, email)
      const setup = await first.request({ method: 'POST', url: '/admin/mfa/setup', token: access_token })
      secrets[email] = setup.json().secret
      assert.equal((await verify(first, email, secrets[email]!, at)).statusCode, 200)
    }
  })
  after(async () => {
    await t?.close()
    await provisioned.dispose()
  })

  test('while the old secret is a previous one, a verification works and seals the secret again', async () => {
    const next = await deploy(NEW, [OLD])
    const before = await storedSecret('ev1@example.com')
    const res = await verify(next, 'ev1@example.com', secrets['ev1@example.com']!, moveTo(next, 2))
    assert.equal(res.statusCode, 200, res.body)
    const after = await storedSecret('ev1@example.com')
    assert.notEqual(after.split('.')[1], before.split('.')[1], 'still sealed under the old key')
  })

  test('with the old secret gone, a re-sealed MFA secret still works; one never re-sealed does not', async () => {
    const last = await deploy(NEW)
    const at = moveTo(last, 4)
    assert.equal((await verify(last, 'ev1@example.com', secrets['ev1@example.com']!, at)).statusCode, 200)
    // Recovery for this one is `wristband admin reset-mfa` (docs/operations.md).
    assert.equal((await verify(last, 'root@example.com', secrets['root@example.com']!, at)).statusCode, 400)
  })
})
