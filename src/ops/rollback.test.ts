// Rollback: the previous release (commit 5e56323, built by scripts/previous-release.sh)
// runs against a database this release has used, migrated and written to, as after a rollback or
// beside it during a rolling upgrade. What this release stored must still work there: the
// administrator's password and MFA, access and refresh tokens, an API key it created, webhooks
// signed with the secret the partner was given, and its Idempotency-Key records (kept without ticket
// codes). PostgreSQL only (the previous release is built without its native SQLite module); skipped
// loudly without TEST_DATABASE_URL.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { generateKeyPairSync } from 'node:crypto'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { generateSync } from 'otplib'
import { Webhook } from 'standardwebhooks'
import { login, startApp, TEST_SECRET, type TestApp } from '../../test/helpers/app.js'
import { httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { newTicketType, newTransfer, seedPartner } from '../../test/helpers/partner.js'
import { freePort } from '../../test/helpers/processes.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { ServiceProcess } from '../../test/helpers/service.js'
import { waitFor } from '../../test/helpers/until.js'

const PREVIOUS_RELEASE = '5e56323'
const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const postgres = httpBackends.find((b) => b.name.startsWith('postgres'))!
const ADMIN = 'root@example.com'
const STEP_S = 30

describe(`rollback to the previous release (${PREVIOUS_RELEASE})`, {
  ...(postgres.skip ? { skip: postgres.skip } : {}),
}, () => {
  let p: ProvisionedBackend
  let receiver: Receiver
  let previous: ServiceProcess | undefined
  let bin: string
  const env = {
    JWT_SECRET: TEST_SECRET,
    EDGE_SIGNING_KEY: generateKeyPairSync('ed25519')
      .privateKey.export({ format: 'pem', type: 'pkcs8' })
      .toString(),
    WEBHOOK_ALLOW_PRIVATE: 'true',
    JOBS_POLL_MS: '20',
    LOG_LEVEL: 'warn',
  }

  before(async () => {
    const built = spawnSync('bash', [path.join(ROOT, 'scripts/previous-release.sh'), PREVIOUS_RELEASE], {
      encoding: 'utf8',
    })
    assert.equal(built.status, 0, `the previous release could not be built:\n${built.stderr}`)
    bin = path.join(built.stdout.trim(), 'bin', 'wristband.js')
    p = await postgres.provision()
    receiver = await startReceiver()
  })
  after(async () => {
    await previous?.stop()
    await receiver?.close()
    await p?.dispose()
  })

  test('what this release stored works on the previous one: password, MFA, tokens, API keys, webhook signatures, idempotency records', {
    timeout: 180_000,
  }, async () => {
    // This release migrates the database and writes, as during an upgrade.
    const t: TestApp = await startApp(postgres, env, p)
    let stored: {
      mfaSecret: string
      lastStep: number
      access: string
      refresh: string
      apiKey: string
      webhookSecret: string
      transferUid: string
      partnerKey: string
      idempotentBody: Record<string, string>
      idempotentAnswer: Record<string, unknown>
    }
    try {
      const keys = await seedPartner(t)
      // MFA enrolled at the real time (the previous release runs on the real clock, and refuses a code
      // of a step at or before the last one used).
      const first = await login(t, ADMIN)
      const setup = await t.request({ method: 'POST', url: '/admin/mfa/setup', token: first.access_token })
      assert.equal(setup.statusCode, 200, setup.body)
      const mfaSecret = setup.json().secret as string
      const lastStep = Math.floor(t.clock.now() / 1000 / STEP_S)
      const verified = await t.request({
        method: 'POST',
        url: '/admin/mfa/verify',
        token: first.access_token,
        payload: { code: generateSync({ secret: mfaSecret, epoch: lastStep * STEP_S }) },
      })
      assert.equal(verified.statusCode, 200, verified.body)
      const { access_token, refresh_token } = verified.json()
      const created = await t.request({
        method: 'POST',
        url: '/tokens/api-key',
        token: access_token,
        payload: { event_id: 1, name: 'made by the new release', scopes: ['api:read', 'api:write'] },
      })
      assert.equal(created.statusCode, 200, created.body)
      const hook = await t.request({
        method: 'PUT',
        url: '/companies/webhook',
        headers: { api_key: keys.write },
        payload: { url: receiver.url },
      })
      assert.equal(hook.statusCode, 200, hook.body)
      const ticketUid = await newTicketType(t, keys.write)
      const transfer = await newTransfer(t, keys.write, ticketUid)
      // An Idempotency-Key record of this release (kept without the ticket code).
      const idempotentBody = {
        event_uid: 'summer-fest-2026',
        email: 'idem-rollback@example.com',
        ticket_uid: ticketUid,
        company_ticket_id: 'idem-rollback-1',
      }
      const idempotent = await t.request({
        method: 'POST',
        url: '/companies/transfer',
        headers: { api_key: keys.write, 'idempotency-key': 'rollback-1' },
        payload: idempotentBody,
      })
      assert.equal(idempotent.statusCode, 201, idempotent.body)
      stored = {
        mfaSecret,
        lastStep,
        access: access_token,
        refresh: refresh_token,
        apiKey: created.json().api_key,
        webhookSecret: hook.json().secret,
        transferUid: transfer.transfer_uid,
        partnerKey: keys.write,
        idempotentBody,
        idempotentAnswer: idempotent.json(),
      }
    } finally {
      await t.close()
    }

    // The rollback: the previous release on the same database.
    previous = new ServiceProcess(await freePort(), { ...p.env, ...env }, p.env.DATA_DIR!, bin)
    await previous.start()
    const call = async (
      method: string,
      url: string,
      body?: unknown,
      headers: Record<string, string> = {},
    ) => {
      const res = await fetch(`${previous!.origin}${url}`, {
        method,
        headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      return { status: res.status, body: (await res.json()) as Record<string, unknown> }
    }
    const valid = async (token: string) => (await call('POST', '/tokens/verify', { token })).body.valid

    // Tokens and API keys issued by this release.
    assert.equal(await valid(stored.access), true, 'an access token of the new release')
    assert.equal(await valid(stored.apiKey), true, 'an API key of the new release')
    const refreshed = await call('POST', '/auth/refresh', { refresh_token: stored.refresh })
    assert.equal(refreshed.status, 200, JSON.stringify(refreshed.body))
    // The password and the MFA secret this release sealed: a code of the next step (within the window).
    const signedIn = await call('POST', '/auth/login', {
      email: ADMIN,
      password: 's3cret-pass',
      role: 'admin',
    })
    assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body))
    const mfa = await call(
      'POST',
      '/admin/mfa/verify',
      { code: generateSync({ secret: stored.mfaSecret, epoch: (stored.lastStep + 1) * STEP_S }) },
      { authorization: `Bearer ${signedIn.body.access_token}` },
    )
    assert.equal(mfa.status, 200, JSON.stringify(mfa.body))
    // A webhook registered with this release, sent by the previous one: signed with the partner's secret.
    const operator = await call('POST', '/auth/login', {
      email: 'op@example.com',
      password: 's3cret-pass',
      role: 'operator',
    })
    assert.equal(operator.status, 200, JSON.stringify(operator.body))
    const from = receiver.log.length
    const used = await call('POST', `/tickets/${stored.transferUid}/use`, undefined, {
      authorization: `Bearer ${operator.body.access_token}`,
    })
    assert.equal(used.status, 200, JSON.stringify(used.body))
    const got = await waitFor(
      () => receiver.log[from],
      30_000,
      'the notification sent by the previous release',
    )
    // An Idempotency-Key record of this release, replayed by the previous one: the same answer in the
    // shape it knows, without the code (which this release does not keep).
    const replayed = await call('POST', '/companies/transfer', stored.idempotentBody, {
      api_key: stored.partnerKey,
      'idempotency-key': 'rollback-1',
    })
    assert.equal(replayed.status, 201, JSON.stringify(replayed.body))
    // In the previous release's own shape: event_timezone is this release's addition to the answer.
    const { event_timezone, ...previousShape } = stored.idempotentAnswer as Record<string, unknown>
    assert.equal(event_timezone, 'Europe/Berlin')
    assert.deepEqual(replayed.body, { ...previousShape, ticket_code: null })
    const payload = new Webhook(stored.webhookSecret).verify(got.body, got.headers as Record<string, string>)
    assert.equal((payload as { transfer_uid: string }).transfer_uid, stored.transferUid)
  })
})
