import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { before, describe, test } from 'node:test'
import type { InjectOptions } from 'fastify'
import { generateSync } from 'otplib'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { SoftAuthenticator } from '../../test/helpers/authenticator.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  claimTokenOf,
  newTicketType,
  newTransfer,
  outboxMail,
  ownerOf,
  type PartnerKeys,
  seedPartner,
} from '../../test/helpers/partner.js'
import { waitFor } from '../../test/helpers/until.js'
import { createApiKey } from '../api-keys/api-keys.store.js'
import { clearAdminMfa } from '../identities/identities.store.js'
import { deletePasskeysOf } from '../passkeys/passkeys.store.js'
import { queueNotification, upsertWebhook } from '../webhooks/webhooks.store.js'
import { ACCESS_MATRIX, type MatrixRole, ROLES, renderMarkdown } from './access-matrix.js'

const MATRIX_DEVICE_MAC = 'AA:BB:CC:DD:EE:03'
const MATRIX_DEVICE_KEY = 'wbd_access-matrix-device-key-012345'

type Event = 1 | 2
/** A call, and what undoes its effect on the roles' accounts once it is answered. */
type Call = Omit<InjectOptions, 'method' | 'url'> & { url?: string; after?: () => Promise<unknown> }
/** Builds a minimal valid call of a route for a role about an event, with fresh fixtures. */
type Builder = (role: MatrixRole, event: Event) => Promise<Call> | Call

interface Operation {
  method: string
  path: string
  apiKey: boolean
}

const EVENT_UID = { 1: 'summer-fest-2026', 2: 'winter-fest-2026' } as const
const DOC = path.join(import.meta.dirname, '../../docs/access-matrix.md')

/** Protected operations of the OpenAPI document: those with a security requirement. */
async function protectedOperations(t: TestApp): Promise<Operation[]> {
  const doc = (await t.request({ method: 'GET', url: '/openapi.json' })).json() as {
    paths: Record<string, Record<string, { security?: Record<string, unknown>[] }>>
  }
  return Object.entries(doc.paths).flatMap(([p, ops]) =>
    Object.entries(ops)
      .filter(([, op]) => (op.security?.length ?? 0) > 0)
      .map(([method, op]) => ({
        method: method.toUpperCase(),
        path: p,
        apiKey: op.security!.some((s) => 'APIKeyHeader' in s),
      })),
  )
}

/** `200`, `200|403` or `200 USED|200 FORBIDDEN` → the expectation for one event. */
function expectation(cell: string, event: Event): { status: number; result?: string } {
  const part = cell.includes('|') ? cell.split('|')[event - 1]! : cell
  const [status, result] = part.split(' ')
  return { status: Number(status), ...(result ? { result } : {}) }
}

/** Markdown with table cells trimmed, so Biome's column alignment does not count as a difference. */
function normalized(markdown: string): string {
  return markdown
    .split('\n')
    .map((line) =>
      line.startsWith('|')
        ? line
            .split('|')
            .map((cell) => cell.trim().replace(/^-+$/, '-'))
            .join('|')
        : line,
    )
    .join('\n')
}

test('docs/access-matrix.md is generated from the table', () => {
  const current = fs.existsSync(DOC) ? fs.readFileSync(DOC, 'utf8') : ''
  assert.equal(
    normalized(current),
    normalized(renderMarkdown()),
    'regenerate: npm run --silent access-matrix',
  )
})

forEachBackend(
  httpBackends,
  'access-control matrix',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let ops: Operation[]
    const credential = {} as Record<MatrixRole, string | undefined>
    const ids = { op1: 0, op2: 0, device1: 0, device2: 0 }
    const ticketTypes = {} as Record<Event, string>

    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      await t.seed({
        devices: [
          { dev_mac: 'AA:BB:CC:DD:EE:02', event_id: 2, operator_email: 'op2@example.com', archived: false },
          // The device role's: a device with its key (a key-less one holds no sync:* scope).
          {
            dev_mac: MATRIX_DEVICE_MAC,
            event_id: 1,
            operator_email: 'op@example.com',
            device_key: MATRIX_DEVICE_KEY,
          },
        ],
      })
      const db = t.db.db
      const op = (email: string) =>
        db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow()
      const device = (mac: string) =>
        db.selectFrom('devices').select('id').where('dev_mac', '=', mac).executeTakeFirstOrThrow()
      ids.op1 = (await op('op@example.com')).id
      ids.op2 = (await op('op2@example.com')).id
      ids.device1 = (await device('AA:BB:CC:DD:EE:01')).id
      ids.device2 = (await device('AA:BB:CC:DD:EE:02')).id
      for (const role of ROLES) credential[role] = await signIn(role)
      ticketTypes[1] = await newTicketType(t, keys.write)
      ticketTypes[2] = await newTicketType(t, keys.other, EVENT_UID[2])
      ops = await protectedOperations(t)
    })

    /** A new check-in list of the event, made by the superadmin. */
    async function freshList(event: Event): Promise<number> {
      const res = await t.request({
        method: 'POST',
        url: `/events/${event}/checkin-lists`,
        token: credential.superadmin!,
        payload: { name: 'matrix fixture' },
      })
      assert.equal(res.statusCode, 201, res.body)
      return res.json().id
    }

    /** The credential of a role: a fresh sign-in (or the event-1 API key). */
    async function signIn(role: MatrixRole): Promise<string | undefined> {
      return (await pairOf(role))?.access_token ?? (role === 'event_client' ? keys.write : undefined)
    }

    async function pairOf(
      role: MatrixRole,
    ): Promise<{ access_token: string; refresh_token?: string } | undefined> {
      switch (role) {
        case 'admin':
          return login(t, 'ev1@example.com')
        case 'superadmin':
          return login(t, 'root@example.com')
        case 'network_manager':
          return login(t, 'nm@example.com', 'network_manager')
        case 'operator':
          return login(t, 'op@example.com', 'operator')
        case 'consumer': {
          const res = await t.request({
            method: 'POST',
            url: '/auth/login/customer',
            payload: { phone: '+4915100000001', password: 's3cret-pass' },
          })
          assert.equal(res.statusCode, 200, res.body)
          return res.json()
        }
        case 'device': {
          const res = await t.request({
            method: 'POST',
            url: '/auth/login/device',
            payload: { dev_mac: MATRIX_DEVICE_MAC, event_id: 1, device_key: MATRIX_DEVICE_KEY },
          })
          assert.equal(res.statusCode, 200, res.body)
          return { access_token: res.json().offline_token }
        }
        default:
          return undefined
      }
    }

    const partnerKey = (event: Event) => (event === 1 ? keys.write : keys.other)
    const transfer = (event: Event) =>
      newTransfer(t, partnerKey(event), ticketTypes[event], {}, EVENT_UID[event])
    const freshKeyId = async (event: Event) =>
      (
        await createApiKey(t.db.db, {
          event_id: event,
          name: 'matrix',
          scopes: ['api:read'],
          created_by: null,
          now: t.clock.now(),
        })
      ).record.id
    const freshDashboardUser = async () => {
      const [user] = (
        await t.seed({
          dashboard_users: [
            {
              username: `matrix-${Math.random().toString(36).slice(2)}`,
              password: 's3cret-pass',
              event_ids: [1],
            },
          ],
        })
      ).dashboard_users!
      return user!.id!
    }
    const ensureWebhook = async (event: Event) =>
      upsertWebhook(
        t.db.db,
        await ownerOf(t, partnerKey(event)),
        'http://127.0.0.1:9/hook',
        `whsec_${'a'.repeat(32)}`,
        t.clock.now(),
      )
    /** The claim link of a new transfer's e-mail (any unclaimed link will do). */
    async function claimToken(): Promise<string> {
      const sent = outboxMail(t).length
      await transfer(1)
      return waitFor(() => {
        const mail = outboxMail(t)
          .slice(sent)
          .find((m) => m.text.includes('/holder/links/'))
        return mail && claimTokenOf(mail.text)
      })
    }

    const adminId = async (role: MatrixRole) =>
      (
        await t.db.db
          .selectFrom('administrators')
          .select('id')
          .where('email', '=', role === 'admin' ? 'ev1@example.com' : 'root@example.com')
          .executeTakeFirstOrThrow()
      ).id
    const builders: Record<string, Builder> = {
      'POST /auth/logout': async (role) => {
        const own = await pairOf(role)
        const refresh = own?.refresh_token ?? (await login(t, 'ev1@example.com')).refresh_token
        return { payload: { refresh_token: refresh } }
      },
      'GET /admin/me': () => ({}),
      'POST /oauth2/introspect': async () => ({
        payload: { token: (await login(t, 'ev1@example.com')).access_token },
      }),
      'POST /admin/mfa/setup': () => ({}),
      'POST /admin/mfa/verify': async (role) => {
        if (role !== 'admin' && role !== 'superadmin') return { payload: { code: '000000' } }
        const setup = await t.request({ method: 'POST', url: '/admin/mfa/setup', token: credential[role]! })
        assert.equal(setup.statusCode, 200, setup.body)
        const code = generateSync({ secret: setup.json().secret, epoch: Math.floor(t.clock.now() / 1000) })
        const email = role === 'admin' ? 'ev1@example.com' : 'root@example.com'
        const { id } = await t.db.db
          .selectFrom('administrators')
          .select('id')
          .where('email', '=', email)
          .executeTakeFirstOrThrow()
        // The table's administrators have MFA off (with it on, the credential-creating routes need a
        // fresh verification): switched off again once answered, as `wristband admin reset-mfa` does.
        return { payload: { code }, after: () => clearAdminMfa(t.db.db, id, t.clock.now()) }
      },
      'POST /admin/passkeys/registration/options': () => ({}),
      'POST /admin/passkeys/registration': async (role) => {
        const key = new SoftAuthenticator('https://localhost', 'localhost')
        const dummy = {
          flow: 'x'.repeat(43),
          response: key.register({ challenge: 'AA', user: { id: 'AA' } }),
        }
        if (role !== 'admin' && role !== 'superadmin') return { payload: dummy }
        const opts = await t.request({
          method: 'POST',
          url: '/admin/passkeys/registration/options',
          token: credential[role]!,
        })
        assert.equal(opts.statusCode, 200, opts.body)
        const { flow, options } = opts.json()
        // The table's administrators have no passkey (with one, the credential routes need a fresh
        // verification): removed again once answered, as `wristband admin reset-passkeys` does.
        const subject = { kind: 'admin' as const, id: await adminId(role) }
        return {
          // A first passkey needs the account's password too (the table's accounts have the standard one).
          payload: { flow, response: key.register(options), password: 's3cret-pass' },
          after: () => deletePasskeysOf(t.db.db, subject),
        }
      },
      'GET /admin/passkeys': () => ({}),
      'DELETE /admin/passkeys/{id}': () => ({ url: '/admin/passkeys/999999' }),
      'GET /admin/sensitive/ping': () => ({}),
      'GET /admin/audit': () => ({}),
      'GET /admin/dashboard-users': () => ({}),
      'POST /admin/dashboard-users': () => ({
        payload: {
          username: `matrix-${Math.random().toString(36).slice(2)}`,
          password: 's3cret-pass',
          event_ids: [1],
        },
      }),
      'PATCH /admin/dashboard-users/{user_id}': async () => ({
        url: `/admin/dashboard-users/${await freshDashboardUser()}`,
        payload: { event_ids: [2] },
      }),
      'DELETE /admin/dashboard-users/{user_id}': async () => ({
        url: `/admin/dashboard-users/${await freshDashboardUser()}`,
      }),
      'GET /events/{event_id}/stats': (_r, event) => ({ url: `/events/${event}/stats` }),
      'GET /events/{event_id}/scan-sync': (_r, event) => ({ url: `/events/${event}/scan-sync?limit=1` }),
      'GET /dashboard/api/events/{event_id}/stats': (_r, event) => ({
        url: `/dashboard/api/events/${event}/stats`,
      }),
      'POST /tokens/api-key': (_r, event) => ({
        payload: { event_id: event, name: 'matrix', scopes: ['api:read'] },
      }),
      'DELETE /tokens/api-key/{key_id}': async (_r, event) => ({
        url: `/tokens/api-key/${await freshKeyId(event)}`,
      }),
      'GET /tokens/api-keys': (_r, event) => ({ url: `/tokens/api-keys?event_id=${event}` }),
      'POST /events/{event_id}/checkin-lists': (_r, event) => ({
        url: `/events/${event}/checkin-lists`,
        payload: { name: 'matrix' },
      }),
      'GET /events/{event_id}/checkin-lists': (_r, event) => ({ url: `/events/${event}/checkin-lists` }),
      'PATCH /events/{event_id}/checkin-lists/{list_id}': async (_r, event) => ({
        url: `/events/${event}/checkin-lists/${await freshList(event)}`,
        payload: { name: 'matrix 2' },
      }),
      'DELETE /events/{event_id}/checkin-lists/{list_id}': async (_r, event) => ({
        url: `/events/${event}/checkin-lists/${await freshList(event)}`,
      }),
      'GET /events/{event_id}/checkin-lists/{list_id}/status': async (_r, event) => ({
        url: `/events/${event}/checkin-lists/${await freshList(event)}/status`,
      }),
      'GET /events/{event_id}/checkins': (_r, event) => ({ url: `/events/${event}/checkins?limit=1` }),
      'GET /tokens/check': (_r, event) => ({ url: `/tokens/check?event=${event}` }),
      'POST /tokens/offline': (_r, event) => ({ payload: { event_id: event } }),
      'POST /devices/{device_id}/token': (_r, event) => ({
        url: `/devices/${event === 1 ? ids.device1 : ids.device2}/token`,
        payload: { operator_id: event === 1 ? ids.op1 : ids.op2 },
      }),
      'POST /devices/{device_id}/revoke': (_r, event) => ({
        url: `/devices/${event === 1 ? ids.device1 : ids.device2}/revoke`,
      }),
      'POST /devices/{device_id}/setup-code': (_r, event) => ({
        url: `/devices/${event === 1 ? ids.device1 : ids.device2}/setup-code`,
      }),
      'GET /consumers/me': () => ({}),
      'PATCH /consumers/me': () => ({ payload: { first_name: 'Matrix' } }),
      'GET /consumers/me/tickets': () => ({}),
      'GET /consumers/me/wallets': () => ({}),
      'POST /holder/links/{token}/claim': async (role) => ({
        // Only a consumer gets past the guard; the others need no real link.
        url: `/holder/links/${role === 'consumer' ? await claimToken() : 'x'.repeat(43)}/claim`,
      }),
      'POST /tickets/{transfer_uid}/use': async (_r, event) => ({
        url: `/tickets/${(await transfer(event)).transfer_uid}/use`,
      }),
      'POST /tickets/use-batch': async (_r, event) => ({
        payload: {
          scans: [
            {
              transfer_uid: (await transfer(event)).transfer_uid,
              used_at: new Date(t.clock.now()).toISOString(),
            },
          ],
        },
      }),
      'POST /companies/ticket': (_r, event) => ({
        payload: {
          event_uid: EVENT_UID[event],
          name: 'Matrix pass',
          price: 10,
          ticket_date: '2026-07-18T12:00:00.000',
        },
      }),
      'GET /companies/tickets': (_r, event) => ({ url: `/companies/tickets?event_uid=${EVENT_UID[event]}` }),
      'POST /companies/transfer': (_r, event) => ({
        payload: {
          event_uid: EVENT_UID[event],
          email: 'matrix@example.com',
          ticket_uid: ticketTypes[event],
          company_ticket_id: `matrix-${Math.random().toString(36).slice(2)}`,
        },
      }),
      'POST /companies/transfers': (_r, event) => ({
        payload: {
          event_uid: EVENT_UID[event],
          transfers: [
            {
              email: 'matrix@example.com',
              ticket_uid: ticketTypes[event],
              company_ticket_id: `matrix-${Math.random().toString(36).slice(2)}`,
            },
          ],
        },
      }),
      'GET /companies/transfer/{company_ticket_id}': async (_r, event) => ({
        url: `/companies/transfer/${(await transfer(event)).company_ticket_id}`,
      }),
      'POST /companies/transfer/{company_ticket_id}/reissue': async (_r, event) => ({
        url: `/companies/transfer/${(await transfer(event)).company_ticket_id}/reissue`,
      }),
      'PUT /companies/webhook': () => ({ payload: { url: 'http://127.0.0.1:9/hook' } }),
      'GET /companies/webhook': async () => {
        await ensureWebhook(1)
        return {}
      },
      'DELETE /companies/webhook': async () => {
        await ensureWebhook(1)
        return {}
      },
      'GET /companies/webhook/deliveries': () => ({}),
      'POST /companies/webhook/deliveries/{id}/retry': async (_r, event) => {
        await ensureWebhook(event)
        assert.ok(
          await queueNotification(t.db.db, t.clock.now(), await ownerOf(t, partnerKey(event)), null, {
            event_uid: EVENT_UID[event],
            transfer_uid: '0'.repeat(32),
            user_email: 'matrix@example.com',
            company_ticket_id: 'matrix',
            status: 'USED',
            used_timestamp: '2026-07-18T20:00:00.000',
          }),
        )
        const d = await t.db.db
          .selectFrom('webhook_deliveries')
          .select('id')
          .where('event_id', '=', event)
          .orderBy('id', 'desc')
          .executeTakeFirstOrThrow()
        return { url: `/companies/webhook/deliveries/${d.id}/retry` }
      },
    }

    test('every protected route of /openapi.json has a row, and every row a route and a request', () => {
      const rows = new Set(ACCESS_MATRIX.map((r) => r.route))
      const routes = ops.map((o) => `${o.method} ${o.path}`)
      assert.deepEqual(
        routes.filter((r) => !rows.has(r)),
        [],
        'protected routes without a row in src/security/access-matrix.ts',
      )
      assert.deepEqual(
        [...rows].filter((r) => !routes.includes(r)),
        [],
        'rows naming no protected route',
      )
      assert.deepEqual(
        [...rows].filter((r) => !builders[r]),
        [],
        'rows without a request',
      )
      for (const r of ACCESS_MATRIX) {
        const byEvent = ROLES.map((role) => r.cells[role].includes('|'))
        assert.ok(byEvent.every(Boolean) || !byEvent.some(Boolean), `${r.route}: all cells own|other or none`)
      }
    })

    describe('every route × role × event answers as the table says', () => {
      for (const row of ACCESS_MATRIX) {
        test(row.route, async () => {
          const op = ops.find((o) => `${o.method} ${o.path}` === row.route)
          assert.ok(op, `${row.route} is documented`)
          const events: Event[] = row.cells.admin.includes('|') ? [1, 2] : [1]
          const wrong: string[] = []
          for (const role of ROLES) {
            for (const event of events) {
              const want = expectation(row.cells[role], event)
              const { url, headers, after, ...rest } = await builders[row.route]!(role, event)
              const cred = credential[role]
              const auth = cred ? (op.apiKey ? { api_key: cred } : { authorization: `Bearer ${cred}` }) : {}
              const res = await t.request({
                method: op.method as 'GET',
                url: url ?? op.path,
                ...rest,
                headers: { ...headers, ...auth },
              })
              await after?.()
              const got = res.statusCode
              const result = want.result && got === 200 ? res.json().results?.[0]?.status : undefined
              if (got !== want.status || result !== want.result)
                wrong.push(
                  `${role} event ${event}: expected ${want.status}${want.result ? ` ${want.result}` : ''}, got ${got}${result ? ` ${result}` : ''} ${res.body.slice(0, 200)}`,
                )
            }
          }
          assert.deepEqual(wrong, [])
        })
      }
    })
  },
  { WEBHOOK_ALLOW_PRIVATE: 'true', TRANSFER_EMAIL_DELAY_SECONDS: '0', JOBS_POLL_MS: '20' },
)
