// The two receivers docs/partner-api.md shows (examples/receivers/: Node without dependencies, Python
// with its standard library only), each run against the service: a real use notification is accepted
// and printed, a replay, a re-spelled timestamp and a tampered body are refused.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import fs from 'node:fs'
import { createServer } from 'node:net'
import path from 'node:path'
import readline from 'node:readline'
import { after, before, test } from 'node:test'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { newTicketType, newTransfer, type PartnerKeys, seedPartner } from '../../test/helpers/partner.js'
import { waitFor } from '../../test/helpers/until.js'

const DIR = path.resolve('examples/receivers')
const RECEIVERS = [
  { name: 'Node', command: path.resolve('node_modules/.bin/node'), file: 'receiver.mjs' },
  { name: 'Python (standard library)', command: '/usr/bin/python3', file: 'receiver.py' },
]

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })

forEachBackend(
  httpBackends,
  'the documented webhook receivers',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let scanner: string
    const children: ChildProcess[] = []
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      scanner = (await login(t, 'op@example.com', 'operator')).access_token
    })
    after(() => {
      for (const c of children) c.kill()
    })

    for (const r of RECEIVERS)
      test(`the ${r.name} receiver verifies a real notification and refuses replays`, {
        skip: fs.existsSync(r.command) ? false : `${r.command} is not installed`,
      }, async () => {
        const port = await freePort()
        const url = `http://127.0.0.1:${port}/hooks`
        const put = await t.request({
          method: 'PUT',
          url: '/companies/webhook',
          headers: { api_key: keys.write },
          payload: { url },
        })
        assert.equal(put.statusCode, 200)
        const child = spawn(r.command, [path.join(DIR, r.file)], {
          env: { ...process.env, WEBHOOK_SECRET: put.json().secret, PORT: String(port) },
          stdio: ['ignore', 'pipe', 'pipe'],
        })
        children.push(child)
        const lines: string[] = []
        readline.createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l))
        let ready = false
        child.stderr!.on('data', (d: Buffer) => {
          if (d.toString().includes('listening')) ready = true
        })
        await waitFor(() => ready, 20_000, `the ${r.name} receiver to listen`)

        const transfer = await newTransfer(t, keys.write, await newTicketType(t, keys.write))
        const use = await t.request({
          method: 'POST',
          url: `/tickets/${transfer.transfer_uid}/use`,
          token: scanner,
        })
        assert.equal(use.statusCode, 200)
        const line = await waitFor(() => lines[0], 20_000, 'the printed notification')
        const got = JSON.parse(line)
        assert.equal(got.company_ticket_id, transfer.company_ticket_id)
        assert.equal(got.status, 'USED')
        assert.match(got.id, /^msg_/)
        const delivery = await waitFor(async () => {
          const rows = await t.db.db
            .selectFrom('webhook_attempts')
            .selectAll()
            .where('url', '=', url)
            .execute()
          return rows.length > 0 && rows
        })
        assert.equal(delivery[0]!.status_code, 204)

        // What an attacker holding a captured delivery could send: each refused with 400.
        const stored = await t.db.db
          .selectFrom('webhook_deliveries')
          .select(['uid', 'payload'])
          .where('transfer_id', 'is not', null)
          .orderBy('id', 'desc')
          .executeTakeFirstOrThrow()
        const { signatureHeaders } = await import('./signing.js')
        // One second on: the service signed its attempt at the current second, and the same id and time is a replay.
        const ts = Math.floor(Date.now() / 1000) + 1
        const headers = signatureHeaders(put.json().secret, stored.uid, ts, stored.payload)
        const send = async (h: Record<string, string>, body = stored.payload) =>
          (await fetch(url, { method: 'POST', headers: { ...h, 'content-type': 'application/json' }, body }))
            .status
        assert.equal(await send(headers), 204, 'a fresh signature of the same message (a resend)')
        assert.equal(await send(headers), 400, 'the same request again (a replay)')
        assert.equal(await send({ ...headers, 'webhook-timestamp': `0${ts}` }), 400, 're-spelled timestamp')
        assert.equal(await send(headers, stored.payload.replace('USED', 'VOID')), 400, 'tampered body')
        assert.equal(await send({ ...headers, 'webhook-signature': 'v1,AAAA' }), 400, 'wrong signature')
        assert.equal(lines.length, 2)
        child.kill()
      })

    test('docs/partner-api.md shows exactly the receivers the tests run', () => {
      const doc = fs.readFileSync(path.resolve('docs/partner-api.md'), 'utf8')
      for (const r of RECEIVERS)
        assert.ok(doc.includes(fs.readFileSync(path.join(DIR, r.file), 'utf8').trim()), r.file)
    })
  },
  { WEBHOOK_ALLOW_PRIVATE: 'true', JOBS_POLL_MS: '20' },
)
