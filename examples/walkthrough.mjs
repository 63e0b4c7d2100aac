#!/usr/bin/env node
// A walk through wristband with the accounts of examples/seed.json: an administrator signs in, a
// backend verifies the token, the administrator creates a partner API key, the partner creates a
// ticket type, transfers a ticket to a holder and registers a webhook, a scanner uses the ticket, and
// the partner receives the signed notification. Node 22 or later, no dependencies:
//
//   BASE_URL=http://127.0.0.1:8000 node examples/walkthrough.mjs
//
// The webhook step needs a receiver the service may call: this script listens on 127.0.0.1, which the
// service accepts only with WEBHOOK_ALLOW_PRIVATE=true (without it, that step is skipped with a note).
// Each step prints what it sent and what came back; the script exits non-zero at the first surprise.
import { createHmac } from 'node:crypto'
import { startReceiver } from './receiver.mjs'

const BASE = (process.env.BASE_URL ?? 'http://127.0.0.1:8000').replace(/\/$/, '')
const EVENT_UID = 'summer-fest-2026'

function check(condition, message) {
  if (!condition) {
    console.error(`✗ ${message}`)
    process.exit(1)
  }
}

/** One call to the service: prints the step, returns the parsed answer, stops on an unexpected status. */
async function call(step, method, path, { body, token, apiKey, expect = 200 } = {}) {
  const headers = { accept: 'application/json' }
  if (body !== undefined) headers['content-type'] = 'application/json'
  if (token) headers.authorization = `Bearer ${token}`
  if (apiKey) headers.api_key = apiKey
  const res = await fetch(`${BASE}${path}`, {
    method,
    headers,
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })
  const text = await res.text()
  const json = text ? JSON.parse(text) : null
  console.log(`\n== ${step}\n${method} ${path} -> ${res.status}`)
  console.log(JSON.stringify(json, null, 2))
  check(res.status === expect, `${step}: expected ${expect}, got ${res.status}`)
  return json
}

/** Standard Webhooks: HMAC-SHA256 of "id.timestamp.body" with the secret after `whsec_`, base64. */
function signatureValid(secret, { headers, body }) {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64')
  const expected = createHmac('sha256', key)
    .update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`)
    .digest('base64')
  return String(headers['webhook-signature'])
    .split(' ')
    .some((s) => s === `v1,${expected}`)
}

// 1. An administrator of the event signs in.
const admin = await call('administrator signs in', 'POST', '/auth/login', {
  body: { email: 'ev1@example.com', password: 'change-me-admin', role: 'admin' },
})

// 2. Any backend checks a bearer token by asking wristband, never by decoding it.
const verified = await call('a backend verifies the access token', 'POST', '/tokens/verify', {
  body: { token: admin.access_token },
})
check(verified.valid && verified.claims.role === 'admin', 'the access token is valid for an admin')

// 3. The administrator gives a ticket partner an API key for the event (shown once).
const key = await call('administrator creates a partner API key', 'POST', '/tokens/api-key', {
  token: admin.access_token,
  // The partner named here is the one the seed's dashboard user `partner1` is bound to.
  body: {
    event_id: 1,
    name: 'walkthrough partner',
    partner: 'Box office',
    scopes: ['api:read', 'api:write'],
  },
})
check(key.api_key.startsWith('wb_'), 'the API key starts with wb_')

// 4. The partner registers its webhook receiver (needs WEBHOOK_ALLOW_PRIVATE=true for 127.0.0.1).
const receiver = await startReceiver()
const hookRes = await fetch(`${BASE}/companies/webhook`, {
  method: 'PUT',
  headers: { 'content-type': 'application/json', api_key: key.api_key },
  body: JSON.stringify({ url: receiver.url }),
})
const hook = await hookRes.json()
console.log(`\n== partner registers its webhook\nPUT /companies/webhook -> ${hookRes.status}`)
console.log(JSON.stringify({ ...hook, secret: hook.secret ? 'whsec_… (shown once)' : undefined }, null, 2))
const webhooks = hookRes.status === 200
if (!webhooks)
  console.log(
    '(webhook step skipped: the service refuses a receiver on 127.0.0.1 without WEBHOOK_ALLOW_PRIVATE=true)',
  )

// 5. The partner adds a ticket type to the event's catalogue.
const ticketType = await call('partner creates a ticket type', 'POST', '/companies/ticket', {
  apiKey: key.api_key,
  body: { event_uid: EVENT_UID, name: 'Weekend pass', price: 129.5, ticket_date: '2026-07-18T12:00:00.000' },
  expect: 201,
})

// 6. The partner sends a ticket to a holder's e-mail address.
const companyTicketId = `walkthrough-${Date.now()}`
const transfer = await call('partner transfers a ticket to a holder', 'POST', '/companies/transfer', {
  apiKey: key.api_key,
  body: {
    event_uid: EVENT_UID,
    email: 'holder@example.com',
    ticket_uid: ticketType.ticket_uid,
    company_ticket_id: companyTicketId,
    balance: 20,
    additional_info: { access_gate: 'North', seat_number: 'A-12' },
  },
  expect: 201,
})
check(transfer.status === 'TRANSFERRED', 'the transfer is TRANSFERRED')

// 7. A scanner at the gate signs in and uses the ticket.
const scanner = await call('scanner signs in', 'POST', '/auth/login', {
  body: { email: 'scanner@example.com', password: 'change-me-scanner', role: 'operator' },
})
const used = await call(
  'scanner uses the ticket at the gate',
  'POST',
  `/tickets/${transfer.transfer_uid}/use`,
  {
    token: scanner.access_token,
    body: { access_gate: 'North' },
  },
)
check(used.status === 'USED', 'the ticket is USED')
await call('a second use is refused', 'POST', `/tickets/${transfer.transfer_uid}/use`, {
  token: scanner.access_token,
  body: { access_gate: 'North' },
  expect: 409,
})

// 8. The partner is told: a signed notification arrives at its receiver.
if (webhooks) {
  // A bound on a hang (a receiver the service cannot reach), not a speed: a busy machine takes its time.
  let bound
  const notification = await Promise.race([
    receiver.next(),
    new Promise((resolve) => {
      bound = setTimeout(resolve, 120_000, null)
    }),
  ])
  clearTimeout(bound)
  check(notification, 'the use notification arrived within 2 minutes')
  console.log(`\n== partner receives the use notification\n${notification.body}`)
  check(signatureValid(hook.secret, notification), 'the notification is signed with the webhook secret')
  const payload = JSON.parse(notification.body)
  check(payload.status === 'USED' && payload.company_ticket_id === companyTicketId, 'it names the ticket')
  console.log('signature valid')
}
receiver.close()

// 9. The partner can always ask what became of a ticket.
const state = await call('partner looks the ticket up', 'GET', `/companies/transfer/${companyTicketId}`, {
  apiKey: key.api_key,
})
check(state.status === 'USED', 'the partner sees USED')

// 10. The administrator signs out: the refresh token is spent.
await call('administrator signs out', 'POST', '/auth/logout', {
  token: admin.access_token,
  body: { refresh_token: admin.refresh_token },
})
await call('the refresh token no longer works', 'POST', '/auth/refresh', {
  body: { refresh_token: admin.refresh_token },
  expect: 401,
})
console.log('\nwalkthrough complete')
