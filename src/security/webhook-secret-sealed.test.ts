import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { Webhook } from 'standardwebhooks'
import { login, startApp, TEST_SECRET, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { tablesHolding } from '../../test/helpers/dump.js'
import {
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerGet,
  seedPartner,
} from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { waitFor } from '../../test/helpers/until.js'
import { newWebhookSecret } from '../webhooks/signing.js'

/**
 * Webhook signing secrets are sealed at rest: a reader of the database cannot sign notifications
 * that a partner would trust. GET and the logs never show them. Rows stored in plain text before
 * sealing keep working and are sealed at the next start (or their next delivery).
 */
const NEW_JWT_SECRET = 'a-new-signing-secret-0123456789abcdefghijkl'
const env = { WEBHOOK_ALLOW_PRIVATE: 'true', JOBS_POLL_MS: '20', WEBHOOK_RETRY_SCHEDULE: '5,30,120' }

eachBackend(httpBackends, 'webhook signing secrets sealed at rest', (backend) => {
  let provisioned: ProvisionedBackend
  let t: TestApp
  let keys: PartnerKeys
  let receiver: Receiver
  before(async () => {
    provisioned = await backend.provision()
    t = await startApp(backend, env, provisioned)
    keys = await seedPartner(t)
    receiver = await startReceiver()
  })
  after(async () => {
    await receiver.close()
    await t.close()
    await provisioned.dispose()
  })

  /** Uses a new ticket and returns the notification the receiver got for it. */
  async function notification() {
    const scanner = (await login(t, 'op@example.com', 'operator')).access_token
    const transfer = await newTransfer(t, keys.write, await newTicketType(t, keys.write))
    const already = receiver.log.length
    const used = await t.request({
      method: 'POST',
      url: `/tickets/${transfer.transfer_uid}/use`,
      token: scanner,
    })
    assert.equal(used.statusCode, 200, used.body)
    return waitFor(() => receiver.log[already])
  }
  const verified = (secret: string, got: { body: string; headers: object }) =>
    new Webhook(secret).verify(got.body, got.headers as Record<string, string>) as { status: string }
  const storedSecret = async () =>
    (
      await t.db.db
        .selectFrom('webhooks')
        .select('secret')
        .where('event_id', '=', 1)
        .executeTakeFirstOrThrow()
    ).secret

  test('a registered signing secret is in no table, no log line and no GET answer, and still signs', async () => {
    const res = await t.request({
      method: 'PUT',
      url: '/companies/webhook',
      headers: { api_key: keys.write },
      payload: { url: receiver.url },
    })
    assert.equal(res.statusCode, 200, res.body)
    const secret: string = res.json().secret
    const key = secret.slice('whsec_'.length)
    assert.deepEqual(await tablesHolding(t.db, secret), [], 'secret readable in the database')
    assert.deepEqual(await tablesHolding(t.db, key), [], 'secret key readable in the database')
    const shown = await partnerGet(t, '/companies/webhook', keys.read)
    assert.equal(shown.statusCode, 200)
    assert.ok(!shown.body.includes(key))
    const got = await notification()
    assert.equal(verified(secret, got).status, 'USED')
    assert.deepEqual(
      t.logs.filter((l) => l.includes(key)),
      [],
    )
  })

  test('a plain secret stored before sealing still signs, and is sealed at its delivery or the next start', async () => {
    const legacy = newWebhookSecret()
    await t.db.db.updateTable('webhooks').set({ secret: legacy }).where('event_id', '=', 1).execute()
    assert.equal(verified(legacy, await notification()).status, 'USED')
    await waitFor(async () => !(await storedSecret()).startsWith('whsec_'))
    assert.deepEqual(await tablesHolding(t.db, legacy.slice(6)), [])

    const older = newWebhookSecret()
    await t.db.db.updateTable('webhooks').set({ secret: older }).where('event_id', '=', 1).execute()
    await t.close()
    t = await startApp(backend, env, provisioned)
    assert.ok(!(await storedSecret()).startsWith('whsec_'), 'the start did not seal the plain secret')
    assert.deepEqual(await tablesHolding(t.db, older.slice(6)), [])
    assert.equal(verified(older, await notification()).status, 'USED')
  })

  test('a signing-secret rotation: the next start seals the secret under the new key, which keeps signing once the old one is removed', async () => {
    const res = await t.request({
      method: 'PUT',
      url: '/companies/webhook',
      headers: { api_key: keys.write },
      payload: { url: receiver.url },
    })
    const secret: string = res.json().secret
    const underOld = await storedSecret()
    await t.close()
    t = await startApp(
      backend,
      { ...env, JWT_SECRET: NEW_JWT_SECRET, JWT_PREVIOUS_SECRETS: TEST_SECRET },
      provisioned,
    )
    assert.notEqual(await storedSecret(), underOld, 'not sealed again under the new signing secret')
    await t.close()
    t = await startApp(backend, { ...env, JWT_SECRET: NEW_JWT_SECRET }, provisioned)
    assert.equal(verified(secret, await notification()).status, 'USED')
  })
})
