// A ticket partner's first integration with wristband, using @wristband/partner-client:
// receive webhooks, register the receiver, create a ticket type, send a ticket, read it back, and
// wait for the verified notification that the ticket was used at the gate.
//
//   WRISTBAND_URL=http://127.0.0.1:8000 WRISTBAND_API_KEY=wb_... EVENT_UID=summer-fest-2026 \
//   RECEIVER_URL=http://your-public-host:9000/hooks RECEIVER_PORT=9000 \
//   node --import tsx examples/partner-quickstart/quickstart.ts
//
// RECEIVER_URL is the address wristband will call (it refuses loopback and private addresses unless
// the service runs with WEBHOOK_ALLOW_PRIVATE=true, as in development).
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
// In your own project: from '@wristband/partner-client'
import {
  ConflictError,
  createPartnerClient,
  type UseNotification,
  unwrap,
  WebhookReceiver,
} from '../../packages/partner-client/src/index.js'

export interface QuickstartOptions {
  baseUrl: string
  apiKey: string
  eventUid: string
  /** Port of the webhook receiver this script starts (0: any free port). */
  receiverPort: number
  /** The receiver's address as wristband reaches it; default http://127.0.0.1:<port>/hooks. */
  receiverUrl?: string
  /** Your order line id, used as company_ticket_id and Idempotency-Key. */
  orderLine: string
  log?: (line: string) => void
}

export async function quickstart(opts: QuickstartOptions): Promise<UseNotification> {
  const log = opts.log ?? console.log
  const client = createPartnerClient({ baseUrl: opts.baseUrl, apiKey: opts.apiKey })

  // 1. A receiver for the use notifications (signature, time and replays checked by the helper).
  let receiver: WebhookReceiver | undefined
  let onUse: (n: UseNotification) => void = () => {}
  const used = new Promise<UseNotification>((resolve) => {
    onUse = resolve
  })
  const server = http.createServer((req, res) => {
    if (!receiver) return void res.writeHead(503).end()
    receiver.nodeListener((webhook) => onUse(webhook.payload))(req, res)
  })
  await new Promise<void>((resolve) => server.listen(opts.receiverPort, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  try {
    // 2. Register it; the answer carries the signing secret, once.
    const url = opts.receiverUrl ?? `http://127.0.0.1:${port}/hooks`
    const { secret } = await unwrap(client.PUT('/companies/webhook', { body: { url } }))
    receiver = new WebhookReceiver({ secret })
    log(`webhook receiver registered: ${url}`)

    // 3. A ticket type in the event's catalogue.
    const ticketType = await unwrap(
      client.POST('/companies/ticket', {
        body: {
          event_uid: opts.eventUid,
          name: 'Weekend pass',
          price: 89.5,
          ticket_date: '2026-07-18T10:00:00.000',
        },
      }),
    )
    log(`ticket type created: ${ticketType.ticket_uid} (${ticketType.name}, ${ticketType.price})`)

    // 4. Send a ticket to a holder. The order line is the Idempotency-Key: running this again
    //    answers the first transfer instead of sending a second ticket.
    let transferUid: string
    try {
      const transfer = await unwrap(
        client.POST('/companies/transfer', {
          body: {
            event_uid: opts.eventUid,
            email: 'holder@example.com',
            ticket_uid: ticketType.ticket_uid,
            company_ticket_id: opts.orderLine,
            balance: 20,
          },
          params: { header: { 'idempotency-key': opts.orderLine } },
        }),
      )
      transferUid = transfer.transfer_uid
    } catch (err) {
      // The order line was sent before, with another ticket type: look that transfer up instead.
      if (!(err instanceof ConflictError && err.code === 'duplicate_company_ticket_id')) throw err
      const known = await unwrap(
        client.GET('/companies/transfer/{company_ticket_id}', {
          params: { path: { company_ticket_id: opts.orderLine } },
        }),
      )
      transferUid = known.transfer_uid
    }
    log(`ticket transferred: ${transferUid}`)

    // 5. Read it back.
    const state = await unwrap(
      client.GET('/companies/transfer/{company_ticket_id}', {
        params: { path: { company_ticket_id: opts.orderLine } },
      }),
    )
    log(`transfer ${state.company_ticket_id}: ${state.status}, balance ${state.balance}`)

    // 6. Wait for the gate to scan it.
    log('waiting for the ticket to be used…')
    const notification = await used
    log(`ticket used: ${notification.company_ticket_id} at ${notification.used_timestamp}`)
    return notification
  } finally {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const env = (name: string, fallback?: string) => {
    const v = process.env[name] ?? fallback
    if (v === undefined) throw new Error(`${name} is not set`)
    return v
  }
  await quickstart({
    baseUrl: env('WRISTBAND_URL', 'http://127.0.0.1:8000'),
    apiKey: env('WRISTBAND_API_KEY'),
    eventUid: env('EVENT_UID'),
    receiverPort: Number(env('RECEIVER_PORT', '0')),
    ...(process.env.RECEIVER_URL ? { receiverUrl: process.env.RECEIVER_URL } : {}),
    orderLine: env('ORDER_LINE', `order-${Date.now()}`),
  })
}
