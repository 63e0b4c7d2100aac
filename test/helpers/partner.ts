import assert from 'node:assert/strict'
// Shared by the partner, holder, ticket and webhook tests.
import fs from 'node:fs'
import path from 'node:path'
import type { LightMyRequestResponse } from 'fastify'
import { createApiKey } from '../../src/api-keys/api-keys.store.js'
import { BASELINE_SCOPES, consumerGrant } from '../../src/identities/grants.js'
import { sha256Hex } from '../../src/platform/digest.js'
import { JwtCodec } from '../../src/tokens/jwt.js'
import { login, TEST_SECRET, type TestApp, withStandardSeed } from './app.js'

export interface PartnerKeys {
  /** api:read + api:write on event 1, partner "Acme" */
  write: string
  /** api:read only on event 1, partner "Acme" (the same partner as `write`) */
  read: string
  /** api:read + api:write on event 2, partner "Other" */
  other: string
  /** api:read + api:write on event 1, partner "Rival": another partner of the same event */
  rival: string
}

export async function seedPartner(t: TestApp): Promise<PartnerKeys> {
  const seeded = await t.seed(
    withStandardSeed({
      customers: [
        { phone: '+4915100000002', password: 's3cret-pass', email: 'second@example.com' },
        { phone: '+4915100000003', password: 's3cret-pass', email: 'third@example.com' },
      ],
    }),
  )
  const make = async (event_id: number, scopes: string[], partner: string) =>
    (
      await createApiKey(t.db.db, {
        event_id,
        name: `k${event_id}-${scopes.join('+')}`,
        scopes,
        created_by: null,
        now: t.clock.now(),
        partner,
      })
    ).plaintext
  void seeded
  return {
    write: await make(1, ['api:read', 'api:write'], 'Acme'),
    read: await make(1, ['api:read'], 'Acme'),
    other: await make(2, ['api:read', 'api:write'], 'Other'),
    rival: await make(1, ['api:read', 'api:write'], 'Rival'),
  }
}

/** The partner and event of a key (to write a partner's receiver or deliveries directly). */
export async function ownerOf(t: TestApp, key: string): Promise<{ eventId: number; partnerId: number }> {
  const r = await t.db.db
    .selectFrom('event_clients')
    .select(['event_id', 'partner_id'])
    .where('token_hash', '=', sha256Hex(key))
    .executeTakeFirstOrThrow()
  return { eventId: r.event_id, partnerId: r.partner_id! }
}

function codec(t: TestApp) {
  return new JwtCodec({
    secret: TEST_SECRET,
    previousSecrets: [],
    audience: 'wristband',
    issuer: 'wristband',
    clock: t.clock,
  })
}

/** An access token of a consumer, signed as the service signs one (there is no consumer login here). */
export function consumerToken(t: TestApp, customerId: number): string {
  return codec(t).issue({ type: 'access', ...consumerGrant({ id: customerId, token_generation: 0 }) }, 900)
    .token
}

/** An offline device token: the device baseline scopes for one event, as /auth/login/device issues. */
export function deviceToken(t: TestApp, operatorId: number, eventId: number, deviceId = 1): string {
  return codec(t).issue(
    {
      type: 'offline',
      sub: String(operatorId),
      role: 'operator',
      device_id: deviceId,
      event_ids: [eventId],
      permissions: { [String(eventId)]: [...BASELINE_SCOPES.device] },
    },
    3600,
  ).token
}

export async function customerId(t: TestApp, phone: string): Promise<number> {
  const r = await t.db.db
    .selectFrom('customers')
    .select('id')
    .where('phone', '=', phone)
    .executeTakeFirstOrThrow()
  return r.id
}

export function partnerPost(
  t: TestApp,
  url: string,
  key: string | undefined,
  payload: unknown,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return t.request({
    method: 'POST',
    url,
    payload: payload as Record<string, unknown>,
    headers: { ...(key ? { api_key: key } : {}), ...headers },
  })
}

/** Registers `url` as the receiver of the key's partner (PUT /companies/webhook); fails the test otherwise. */
export async function registerReceiver(t: TestApp, key: string, url: string): Promise<void> {
  const res = await t.request({
    method: 'PUT',
    url: '/companies/webhook',
    headers: { api_key: key },
    payload: { url },
  })
  assert.equal(res.statusCode, 200, res.body)
}

export function partnerGet(t: TestApp, url: string, key: string): Promise<LightMyRequestResponse> {
  return t.request({ method: 'GET', url, headers: { api_key: key } })
}

let ticketCounter = 0
/** A ticket type of event 1 (or the key's event); returns its ticket_uid. */
export async function newTicketType(t: TestApp, key: string, eventUid = 'summer-fest-2026'): Promise<string> {
  ticketCounter++
  const res = await partnerPost(t, '/companies/ticket', key, {
    event_uid: eventUid,
    name: `Day pass ${ticketCounter}`,
    price: 49.9,
    ticket_date: '2026-07-18T12:00:00.000',
  })
  if (res.statusCode !== 201) throw new Error(`ticket type: ${res.statusCode} ${res.body}`)
  return res.json().ticket_uid
}

let transferCounter = 0
export async function newTransfer(
  t: TestApp,
  key: string,
  ticketUid: string,
  extra: Record<string, unknown> = {},
  eventUid = 'summer-fest-2026',
): Promise<{ transfer_uid: string; company_ticket_id: string }> {
  transferCounter++
  const res = await partnerPost(t, '/companies/transfer', key, {
    event_uid: eventUid,
    email: `holder${transferCounter}@example.com`,
    ticket_uid: ticketUid,
    company_ticket_id: `ct-${Date.now()}-${transferCounter}`,
    ...extra,
  })
  if (res.statusCode !== 201) throw new Error(`transfer: ${res.statusCode} ${res.body}`)
  return res.json()
}

/** Messages the outbox transport wrote (the default transport when SMTP_URL is unset). */
export function outboxMail(t: TestApp): { to: string; subject: string; text: string; html?: string }[] {
  const dir = path.join(t.config.DATA_DIR, 'outbox', 'mail')
  if (!fs.existsSync(dir)) return []
  return fs
    .readdirSync(dir)
    .sort()
    .flatMap((f) => {
      // A file still being written is read on a later poll.
      try {
        return [JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'))]
      } catch {
        return []
      }
    })
}

/** The claim token in a transfer e-mail. */
export function claimTokenOf(text: string): string {
  const m = /\/holder\/links\/([A-Za-z0-9_-]{43})/.exec(text)
  if (!m) throw new Error(`no claim link in ${text}`)
  return m[1]!
}

/** Revokes an API key as an administrator does (DELETE /tokens/api-key/{id}, signed in as root). */
export async function revokeKeyAsAdmin(t: TestApp, keyId: number): Promise<void> {
  const admin = await login(t, 'root@example.com')
  const res = await t.request({
    method: 'DELETE',
    url: `/tokens/api-key/${keyId}`,
    token: admin.access_token,
  })
  assert.equal(res.statusCode, 200, res.body)
}
