// The partner flow and the scanner flow through Prism's validating proxy (@stoplight/prism-cli, a dev
// dependency), built from the service's own /openapi.json: any request or answer that breaks the
// contract is a violation (`sl-violations`), and the test fails on it. Prism checks the headers a
// document declares but not the ones it leaves out, so the test also fails on an answer header of the
// contract (rate limits, Retry-After, Idempotent-Replayed) that the document does not declare for
// that operation and status.
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

/** The answer headers partner clients read, which the document must declare where they are sent. */
const CONTRACT_HEADERS = [
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'retry-after',
  'idempotent-replayed',
]

type Doc = { paths: Record<string, Record<string, { responses: Record<string, { headers?: object }> }>> }

/** The headers the document declares for an answer of `status` to `method url` (lower case). */
function declaredHeaders(doc: Doc, method: string, url: string, status: number): string[] {
  const pathname = new URL(url, 'http://x').pathname
  const template = Object.keys(doc.paths).find((p) =>
    new RegExp(`^${p.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(pathname),
  )
  const answer = template ? doc.paths[template]?.[method.toLowerCase()]?.responses[String(status)] : undefined
  return Object.keys(answer?.headers ?? {}).map((h) => h.toLowerCase())
}
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
    let document: Doc
    const violations: string[] = []
    const seenHeaders = new Set<string>()
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
      document = JSON.parse(doc)
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
      const declared = declaredHeaders(document, method, url, res.status)
      for (const h of CONTRACT_HEADERS)
        if (res.headers.has(h)) {
          seenHeaders.add(h)
          if (!declared.includes(h)) violations.push(`${method} ${url} → ${res.status}: ${h} is not declared`)
        }
      return { status: res.status, headers: res.headers, json: () => JSON.parse(text) }
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
      const replayed = await call(
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
      assert.equal(replayed.headers.get('idempotent-replayed'), 'true')
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
      // Each result is exactly one of the two forms (Prism checks the oneOf): made, refused.
      assert.deepEqual(
        batch.json().results.map((r: { status: number }) => r.status),
        [201, 409],
      )
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
      // The header check saw the headers it is about (it would pass vacuously otherwise).
      for (const h of ['ratelimit-limit', 'x-ratelimit-remaining', 'idempotent-replayed'])
        assert.ok(seenHeaders.has(h), `no answer carried ${h}`)
    })
  },
  { WEBHOOK_ALLOW_PRIVATE: 'true', JOBS_POLL_MS: '20' },
)
