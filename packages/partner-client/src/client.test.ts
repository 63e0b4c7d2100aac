// The client against the real service on a socket: a partner's whole integration, end to end.
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { forEachBackend, login, type TestApp } from '../../../test/helpers/app.js'
import { httpBackends } from '../../../test/helpers/backends.js'
import { type PartnerKeys, seedPartner } from '../../../test/helpers/partner.js'
import { until } from '../../../test/helpers/until.js'
import { createPartnerClient, type PartnerClient } from './client.js'
import { ConflictError, PermissionError, unwrap, ValidationError } from './errors.js'
import { type VerifiedWebhook, WebhookReceiver } from './webhooks.js'

interface Captured {
  headers: http.IncomingHttpHeaders
  body: Buffer
  answered: number
}

/** A partner's webhook endpoint built with the helper; it keeps every raw request to replay later. */
async function startPartnerEndpoint() {
  const verified: VerifiedWebhook[] = []
  const raw: Captured[] = []
  let receiver: WebhookReceiver | undefined
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      if (!receiver) {
        res.writeHead(503).end()
        return
      }
      try {
        verified.push(receiver.verify(body, req.headers))
        raw.push({ headers: req.headers, body, answered: 204 })
        res.writeHead(204).end()
      } catch (err) {
        raw.push({ headers: req.headers, body, answered: 400 })
        res.writeHead(400).end((err as Error).message)
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`
  return {
    url,
    verified,
    raw,
    useSecret(secret: string) {
      receiver = new WebhookReceiver({ secret })
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

forEachBackend(
  httpBackends,
  'partner client against the live service',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let baseUrl: string
    let client: PartnerClient
    let endpoint: Awaited<ReturnType<typeof startPartnerEndpoint>>
    const sent: { method: string; path: string; idempotencyKey: string | null; apiKey: string | null }[] = []
    /** The real fetch, observed: what the client put on the wire. */
    const observedFetch: typeof fetch = async (input, init) => {
      const request = new Request(input, init)
      const u = new URL(request.url)
      sent.push({
        method: request.method,
        path: u.pathname,
        idempotencyKey: request.headers.get('idempotency-key'),
        apiKey: request.headers.get('api_key'),
      })
      return fetch(request)
    }

    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      await t.app.listen({ port: 0, host: '127.0.0.1' })
      baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`
      client = createPartnerClient({ baseUrl, apiKey: keys.write, fetch: observedFetch })
      endpoint = await startPartnerEndpoint()
    })
    after(() => endpoint.close())

    test('create a ticket type, transfer tickets, read them, and receive the verified use webhook', async () => {
      const hook = await unwrap(client.PUT('/companies/webhook', { body: { url: endpoint.url } }))
      assert.match(hook.secret, /^whsec_/)
      endpoint.useSecret(hook.secret)

      const ticketType = await unwrap(
        client.POST('/companies/ticket', {
          body: {
            event_uid: 'summer-fest-2026',
            name: 'Weekend pass',
            price: 149.5,
            ticket_date: '2026-07-18T20:00:00.000',
          },
        }),
      )
      assert.equal(ticketType.name, 'Weekend pass')

      const transfers = []
      for (const n of [1, 2])
        transfers.push(
          await unwrap(
            client.POST('/companies/transfer', {
              body: {
                event_uid: 'summer-fest-2026',
                email: 'holder@example.com',
                ticket_uid: ticketType.ticket_uid,
                company_ticket_id: `order-7-${n}`,
                balance: 10,
              },
            }),
          ),
        )
      assert.equal(transfers[0]!.status, 'TRANSFERRED')

      const list = await unwrap(client.GET('/companies/tickets'))
      assert.ok(list.tickets.some((x) => x.ticket_uid === ticketType.ticket_uid))
      const read = await unwrap(
        client.GET('/companies/transfer/{company_ticket_id}', {
          params: { path: { company_ticket_id: 'order-7-2' } },
        }),
      )
      assert.equal(read.transfer_uid, transfers[1]!.transfer_uid)
      assert.equal(read.balance, 10)

      // A scanner uses the first ticket; the service notifies the partner's endpoint.
      const scanner = (await login(t, 'op@example.com', 'operator')).access_token
      const use = await fetch(`${baseUrl}/tickets/${transfers[0]!.transfer_uid}/use`, {
        method: 'POST',
        headers: { authorization: `Bearer ${scanner}` },
      })
      assert.equal(use.status, 200, await use.text())
      await until('the use webhook to arrive verified', () => endpoint.verified.length > 0)
      const [notification] = endpoint.verified
      assert.equal(notification!.payload.transfer_uid, transfers[0]!.transfer_uid)
      assert.equal(notification!.payload.company_ticket_id, 'order-7-1')
      assert.equal(notification!.payload.status, 'USED')
      assert.match(notification!.id, /^msg_/)

      const deliveries = await unwrap(client.GET('/companies/webhook/deliveries'))
      await until('the delivery to be recorded as delivered', async () => {
        const d = await unwrap(
          client.GET('/companies/webhook/deliveries', { params: { query: { status: 'delivered' } } }),
        )
        return d.deliveries.length === 1
      })
      assert.ok(deliveries.deliveries.length >= 1)
    })

    test('the receiver helper refuses a replayed delivery and a tampered body', async () => {
      const first = endpoint.raw.find((r) => r.answered === 204)
      assert.ok(first, 'a delivery was accepted')
      const post = (headers: http.IncomingHttpHeaders, body: Buffer) =>
        fetch(endpoint.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'webhook-id': String(headers['webhook-id']),
            'webhook-timestamp': String(headers['webhook-timestamp']),
            'webhook-signature': String(headers['webhook-signature']),
          },
          body,
        })
      const replayed = await post(first.headers, first.body)
      assert.equal(replayed.status, 400)
      assert.match(await replayed.text(), /replay/)
      const tampered = Buffer.from(first.body.toString().replace('USED', 'UNUSED'))
      const forged = await post(
        { ...first.headers, 'webhook-timestamp': String(Math.floor(Date.now() / 1000)) },
        tampered,
      )
      assert.equal(forged.status, 400)
      assert.equal(endpoint.verified.length, 1)
    })

    test('every POST carries the API key and an Idempotency-Key; a given key is kept and answers the same', async () => {
      const posts = sent.filter((s) => s.method === 'POST')
      assert.ok(posts.length >= 3)
      for (const s of sent) assert.equal(s.apiKey, keys.write)
      for (const p of posts) assert.match(p.idempotencyKey ?? '', /^[0-9a-f-]{36}$/)
      assert.equal(new Set(posts.map((p) => p.idempotencyKey)).size, posts.length, 'a new key per call')

      const [ticketType] = (await unwrap(client.GET('/companies/tickets'))).tickets
      const body = {
        event_uid: 'summer-fest-2026',
        email: 'again@example.com',
        ticket_uid: ticketType!.ticket_uid,
        company_ticket_id: 'order-8-1',
      }
      const headers = { 'idempotency-key': 'order-8-1-attempt' }
      const once = await unwrap(client.POST('/companies/transfer', { body, params: { header: headers } }))
      const twice = await unwrap(client.POST('/companies/transfer', { body, params: { header: headers } }))
      assert.equal(twice.transfer_uid, once.transfer_uid)
      assert.equal(sent.at(-1)!.idempotencyKey, 'order-8-1-attempt')
    })

    test('failures are typed errors carrying the status and the `error` code', async () => {
      const [ticketType] = (await unwrap(client.GET('/companies/tickets'))).tickets
      const body = {
        event_uid: 'summer-fest-2026',
        email: 'again@example.com',
        ticket_uid: ticketType!.ticket_uid,
        company_ticket_id: 'order-8-1',
      }
      await assert.rejects(unwrap(client.POST('/companies/transfer', { body })), (err: unknown) => {
        assert.ok(err instanceof ConflictError)
        assert.equal(err.status, 409)
        assert.equal(err.code, 'duplicate_company_ticket_id')
        return true
      })
      await assert.rejects(
        unwrap(client.POST('/companies/transfer', { body: { ...body, balance: 1.234 } })),
        (err: unknown) => err instanceof ValidationError && err.issues[0]!.loc.includes('balance'),
      )
      const reader = createPartnerClient({ baseUrl, apiKey: keys.read })
      await assert.rejects(
        unwrap(reader.POST('/companies/transfer', { body })),
        (err: unknown) => err instanceof PermissionError && err.status === 403,
      )
    })
  },
  { WEBHOOK_ALLOW_PRIVATE: 'true', JOBS_POLL_MS: '20' },
)
