// The restore drill: back up as docs/operations.md says, lose everything, restore as it
// says, and find accounts, tokens, API keys, MFA, ticket codes and webhook signatures unchanged. On
// SQLite with `wristband backup --keys` and the generated keys; on PostgreSQL with pg_dump/pg_restore
// and the keys of the environment (JWT_SECRET, EDGE_SIGNING_KEY), as production keeps them.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { generateKeyPairSync } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { describe, test } from 'node:test'
import pg from 'pg'
import { Webhook } from 'standardwebhooks'
import { login, startApp, type TestApp } from '../../test/helpers/app.js'
import { httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { wristband } from '../../test/helpers/cli.js'
import { enrolMfa, freshMfaTokens } from '../../test/helpers/mfa.js'
import {
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerGet,
  seedPartner,
} from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { waitFor } from '../../test/helpers/until.js'

const [sqlite, postgres] = httpBackends
const ENV = { WEBHOOK_ALLOW_PRIVATE: 'true', JOBS_POLL_MS: '20' }
const ADMIN = 'root@example.com'

/** What the service held before the disaster, as its users hold it. */
interface Before {
  /** The old instance's clock at the backup (MFA codes moved it on); the restored one goes on from there. */
  at: number
  keys: PartnerKeys
  mfaSecret: string
  refreshToken: string
  accessToken: string
  webhookSecret: string
  companyTicketId: string
  transferUid: string
  ticketCode: string
}

async function populate(t: TestApp, receiver: Receiver): Promise<Before> {
  const keys = await seedPartner(t)
  const mfaSecret = await enrolMfa(t, ADMIN)
  const { access_token, refresh_token } = await freshMfaTokens(t, ADMIN, mfaSecret)
  const hook = await t.request({
    method: 'PUT',
    url: '/companies/webhook',
    headers: { api_key: keys.write },
    payload: { url: receiver.url },
  })
  assert.equal(hook.statusCode, 200, hook.body)
  const transfer = await newTransfer(t, keys.write, await newTicketType(t, keys.write))
  const detail = await partnerGet(t, `/companies/transfer/${transfer.company_ticket_id}`, keys.read)
  assert.equal(detail.statusCode, 200, detail.body)
  const ticketCode = detail.json().ticket_code as string
  assert.ok(ticketCode, 'the ticket has a code')
  return {
    at: t.clock.now(),
    keys,
    mfaSecret,
    refreshToken: refresh_token,
    accessToken: access_token,
    webhookSecret: hook.json().secret,
    companyTicketId: transfer.company_ticket_id,
    transferUid: transfer.transfer_uid,
    ticketCode,
  }
}

async function verify(t: TestApp, token: string): Promise<boolean> {
  const res = await t.request({ method: 'POST', url: '/tokens/verify', payload: { token } })
  assert.equal(res.statusCode, 200, res.body)
  return res.json().valid
}

async function expectUnchanged(t: TestApp, before: Before, receiver: Receiver): Promise<void> {
  t.clock.advance(Math.max(0, before.at - t.clock.now()))
  // Accounts and MFA: the administrator signs in and passes MFA with the authenticator enrolled before.
  await freshMfaTokens(t, ADMIN, before.mfaSecret)
  // Tokens: issued before, still valid; the refresh token still refreshes.
  assert.equal(await verify(t, before.accessToken), true, 'an access token issued before the backup')
  const refreshed = await t.request({
    method: 'POST',
    url: '/auth/refresh',
    payload: { refresh_token: before.refreshToken },
  })
  assert.equal(refreshed.statusCode, 200, refreshed.body)
  // API keys.
  assert.equal(await verify(t, before.keys.write), true, 'an API key created before the backup')
  const detail = await partnerGet(t, `/companies/transfer/${before.companyTicketId}`, before.keys.read)
  assert.equal(detail.statusCode, 200, detail.body)
  // Ticket codes: the very same code (the QR code on the holder's phone) after the restore.
  assert.equal(detail.json().ticket_code, before.ticketCode, 'the ticket code changed')
  // Webhooks: a use after the restore is signed with the secret the partner was given before.
  const from = receiver.log.length
  const operator = await login(t, 'op@example.com', 'operator')
  const used = await t.request({
    method: 'POST',
    url: `/tickets/${before.transferUid}/use`,
    token: operator.access_token,
  })
  assert.equal(used.statusCode, 200, used.body)
  const got = await waitFor(() => receiver.log[from], 15_000, 'the use notification')
  const payload = new Webhook(before.webhookSecret).verify(got.body, got.headers as Record<string, string>)
  assert.equal((payload as { transfer_uid: string }).transfer_uid, before.transferUid)
}

describe('restore drill', () => {
  test('SQLite: wristband backup --keys, everything lost, restored as documented: nothing changed', async () => {
    const p = await sqlite!.provision()
    const receiver = await startReceiver()
    const live = path.join(p.env.DATA_DIR!, 'live')
    const restoredDir = path.join(p.env.DATA_DIR!, 'restored')
    const backup = path.join(p.env.DATA_DIR!, 'backups', 'wristband.db')
    const keys = path.join(p.env.DATA_DIR!, 'secret-store')
    fs.mkdirSync(path.dirname(backup))
    // The keys generated into DATA_DIR, as a development or single-machine set-up has them.
    const own = (dir: string) => ({
      ...ENV,
      DATA_DIR: dir,
      DATABASE_URL: `sqlite:${path.join(dir, 'wristband.db')}`,
      JWT_SECRET: '',
    })
    const noDispose: ProvisionedBackend = { env: {}, dispose: async () => {} }
    let t: TestApp | undefined
    try {
      t = await startApp(sqlite!, own(live), noDispose)
      const before = await populate(t, receiver)
      const run = await wristband(['backup', backup, '--keys', keys], {
        DATA_DIR: live,
        DATABASE_URL: `sqlite:${path.join(live, 'wristband.db')}`,
      })
      assert.equal(run.code, 0, run.stderr)
      await t.close()
      t = undefined
      fs.rmSync(live, { recursive: true, force: true })

      // The documented restore: the backup in the place of the database, the keys back into DATA_DIR.
      fs.mkdirSync(restoredDir, { mode: 0o700 })
      fs.copyFileSync(backup, path.join(restoredDir, 'wristband.db'))
      for (const key of fs.readdirSync(keys))
        fs.copyFileSync(path.join(keys, key), path.join(restoredDir, key))
      t = await startApp(sqlite!, own(restoredDir), noDispose)
      await expectUnchanged(t, before, receiver)
    } finally {
      await t?.close()
      await receiver.close()
      await p.dispose()
    }
  })

  test('PostgreSQL: pg_dump, the schema dropped, pg_restore with the same keys: nothing changed', {
    ...(postgres?.skip ? { skip: postgres.skip } : {}),
  }, async () => {
    const p = await postgres!.provision()
    const receiver = await startReceiver()
    const env = {
      ...ENV,
      EDGE_SIGNING_KEY: generateKeyPairSync('ed25519')
        .privateKey.export({ format: 'pem', type: 'pkcs8' })
        .toString(),
    }
    const dump = path.join(p.env.DATA_DIR!, 'wristband.dump')
    const url = p.env.DATABASE_URL!
    const schema = p.env.DATABASE_SCHEMA!
    let t: TestApp | undefined
    try {
      t = await startApp(postgres!, env, p)
      const before = await populate(t, receiver)
      const dumped = spawnSync('pg_dump', ['-Fc', '-n', schema, '-f', dump, url], { encoding: 'utf8' })
      assert.equal(dumped.status, 0, dumped.stderr)
      await t.close()
      t = undefined
      const admin = new pg.Client({ connectionString: url })
      await admin.connect()
      await admin.query(`drop schema ${schema} cascade`)
      await admin.end()

      const restored = spawnSync('pg_restore', ['-d', url, dump], { encoding: 'utf8' })
      assert.equal(restored.status, 0, restored.stderr)
      t = await startApp(postgres!, env, p)
      await expectUnchanged(t, before, receiver)
    } finally {
      await t?.close()
      await receiver.close()
      await p.dispose()
    }
  })
})
