// Issue 29.5: the partner flow and the scanner flow through Prism's validating proxy
// (@stoplight/prism-cli, a dev dependency), built from the service's own /openapi.json: any request or
// answer that breaks the contract is a violation (`sl-violations`), and the test fails on it.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import fs from 'node:fs'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { forEachBackend, login, nextAddress, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { type PartnerKeys, seedPartner } from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { waitFor } from '../../test/helpers/until.js'

const PRISM = path.resolve('node_modules/.bin/prism')
const skip = fs.existsSync(PRISM) ? false : '@stoplight/prism-cli is not installed: Prism suite SKIPPED'

forEachBackend(
  httpBackends,
  'the partner and scanner flows through Prism',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let prism: ChildProcess | undefined
    let proxy: string
    let receiver: Receiver
    const violations: string[] = []
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-prism-'))

    before(async () => {
      if (skip) return
      t = ctx()
      keys = await seedPartner(t)
      receiver = await startReceiver()
      await t.app.listen({ port: 0, host: '127.0.0.1' })
      const upstream = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`
      const doc = (await t.request({ method: 'GET', url: '/openapi.json' })).body
      fs.writeFileSync(path.join(dir, 'openapi.json'), doc)
      const port = 20_000 + Math.floor(Math.random() * 20_000)
      proxy = `http://127.0.0.1:${port}`
      prism = spawn(
        PRISM,
        ['proxy', path.join(dir, 'openapi.json'), upstream, '--port', String(port), '--errors', '-v', 'warn'],
        { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SCARF_ANALYTICS: 'false' } },
      )
      prism.stdout!.on('data', () => {})
      prism.stderr!.on('data', () => {})
      await waitFor(
        async () => {
          try {
            return (await fetch(`${proxy}/health`)).status === 200
          } catch {
            return false
          }
        },
        60_000,
        'Prism to listen',
      )
    })
    after(async () => {
      prism?.kill()
      await receiver?.close()
      fs.rmSync(dir, { recursive: true, force: true })
    })

    /** A call through the proxy; a contract violation of the request or the answer is recorded. */
    async function call(method: string, url: string, body?: unknown, headers: Record<string, string> = {}) {
      const res = await fetch(`${proxy}${url}`, {
        method,
        headers: {
          'x-forwarded-for': nextAddress(),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      })
      const text = await res.text()
      // With --errors Prism answers a violation itself (application/problem+json, a type of its own);
      // a warning-level one comes back in the `sl-violations` header.
      const v = res.headers.get('sl-violations') ?? (text.includes('stoplight.io/prism/errors') ? text : null)
      if (v) violations.push(`${method} ${url} → ${res.status}: ${v}`)
      return { status: res.status, json: () => JSON.parse(text) }
    }

    test('every request and answer of the partner flow and the scanner flow keeps the contract', {
      skip,
    }, async () => {
      const key = { api_key: keys.write }
      // The check is real: a request that breaks the contract is a violation Prism reports.
      const wrong = await call(
        'POST',
        '/companies/transfer',
        { event_uid: 'summer-fest-2026', email: 7 },
        key,
      )
      assert.equal(wrong.status, 422)
      assert.equal(violations.length, 1, 'Prism did not see the violation')
      violations.length = 0
      const put = await call('PUT', '/companies/webhook', { url: receiver.url }, key)
      assert.equal(put.status, 200)
      const type = await call(
        'POST',
        '/companies/ticket',
        {
          event_uid: 'summer-fest-2026',
          name: 'Day pass',
          price: 49.9,
          ticket_date: '2026-07-18T12:00:00.000',
        },
        { ...key, 'idempotency-key': 'prism-type-1' },
      )
      assert.equal(type.status, 201)
      const ticketUid = type.json().ticket_uid
      assert.equal((await call('GET', '/companies/tickets', undefined, key)).status, 200)
      const one = await call(
        'POST',
        '/companies/transfer',
        {
          event_uid: 'summer-fest-2026',
          email: 'prism@example.com',
          ticket_uid: ticketUid,
          company_ticket_id: 'prism-1',
          balance: 10,
          additional_info: { access_gate: 'North' },
        },
        key,
      )
      assert.equal(one.status, 201)
      const batch = await call(
        'POST',
        '/companies/transfers',
        {
          event_uid: 'summer-fest-2026',
          transfers: [
            { email: 'prism@example.com', ticket_uid: ticketUid, company_ticket_id: 'prism-2' },
            { email: 'prism@example.com', ticket_uid: ticketUid, company_ticket_id: 'prism-1' },
          ],
        },
        key,
      )
      assert.equal(batch.status, 200)
      assert.equal((await call('GET', '/companies/transfer/prism-1', undefined, key)).status, 200)
      assert.equal((await call('GET', '/companies/transfer/nope', undefined, key)).status, 404)
      assert.equal((await call('GET', '/companies/webhook', undefined, key)).status, 200)
      assert.equal((await call('POST', '/companies/transfer/prism-2/reissue', undefined, key)).status, 200)

      // The scanner: sign in, use one ticket (with and without a body), use a batch, read the sync feed.
      const scanner = (await login(t, 'op@example.com', 'operator')).access_token
      const auth = { authorization: `Bearer ${scanner}` }
      const signIn = await call('POST', '/auth/login', {
        email: 'op@example.com',
        password: 's3cret-pass',
        role: 'operator',
      })
      assert.equal(signIn.status, 200)
      const used = await call('POST', `/tickets/${one.json().transfer_uid}/use`, undefined, auth)
      assert.equal(used.status, 200)
      const again = await call(
        'POST',
        `/tickets/${one.json().transfer_uid}/use`,
        { access_gate: 'North' },
        auth,
      )
      assert.equal(again.status, 409)
      const second = batch.json().results[0].transfer.transfer_uid
      const uses = await call(
        'POST',
        '/tickets/use-batch',
        { scans: [{ transfer_uid: second, used_at: new Date().toISOString() }] },
        auth,
      )
      assert.equal(uses.status, 200)
      await waitFor(() => receiver.log.length >= 2)
      const deliveries = await call('GET', '/companies/webhook/deliveries', undefined, key)
      assert.equal(deliveries.status, 200)
      assert.deepEqual(violations, [])
    })
  },
  { WEBHOOK_ALLOW_PRIVATE: 'true', JOBS_POLL_MS: '20' },
)
