import { Type } from 'typebox'
import { Value } from 'typebox/value'
import { upsertCustomerByPhone } from '../consumers/consumers.store.js'
import { upsertDashboardUser } from '../dashboard/dashboard-users.store.js'
import { endDeviceTokens } from '../devices/devices.service.js'
import { upsertDevice } from '../devices/devices.store.js'
import { upsertEvent } from '../events/events.store.js'
import {
  findOperatorByEmail,
  upsertAdministrator,
  upsertNetworkManager,
  upsertOperator,
} from '../identities/identities.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { sha256Hex } from '../platform/digest.js'
import { isTimeZone } from '../platform/formats.js'
import { hashPassword } from '../platform/passwords.js'
import type { Revocation } from '../tokens/revocations.js'

const Email = Type.String({ minLength: 3, maxLength: 254, pattern: '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$' })
const Password = Type.String({ minLength: 8, maxLength: 128 })
const EventIds = Type.Array(Type.Integer({ minimum: 1 }))
const strict = { additionalProperties: false }

export const SeedDocument = Type.Object(
  {
    events: Type.Optional(
      Type.Array(
        Type.Object(
          {
            id: Type.Optional(Type.Integer({ minimum: 1 })),
            uid: Type.String({ minLength: 1, maxLength: 100 }),
            name: Type.String({ minLength: 1, maxLength: 200 }),
            timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
          },
          strict,
        ),
      ),
    ),
    administrators: Type.Optional(
      Type.Array(
        Type.Object(
          {
            id: Type.Optional(Type.Integer()),
            email: Email,
            password: Password,
            role: Type.Union([Type.Literal('admin'), Type.Literal('superadmin')]),
            event_ids: Type.Optional(EventIds),
          },
          strict,
        ),
      ),
    ),
    network_managers: Type.Optional(
      Type.Array(
        Type.Object(
          {
            id: Type.Optional(Type.Integer()),
            email: Email,
            password: Password,
            event_ids: Type.Optional(EventIds),
          },
          strict,
        ),
      ),
    ),
    operators: Type.Optional(
      Type.Array(
        Type.Object(
          {
            id: Type.Optional(Type.Integer()),
            email: Email,
            password: Password,
            event_id: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]),
            mode: Type.Optional(Type.Integer({ minimum: 0, maximum: 99 })),
            permissions: Type.Optional(
              Type.Union([Type.Record(Type.String(), Type.Array(Type.String())), Type.Null()]),
            ),
          },
          strict,
        ),
      ),
    ),
    customers: Type.Optional(
      Type.Array(
        Type.Object(
          {
            id: Type.Optional(Type.Integer()),
            phone: Type.String({ minLength: 3, maxLength: 32 }),
            password: Type.Optional(Password),
            email: Type.Optional(Email),
            first_name: Type.Optional(Type.String({ maxLength: 100 })),
            last_name: Type.Optional(Type.String({ maxLength: 100 })),
          },
          strict,
        ),
      ),
    ),
    devices: Type.Optional(
      Type.Array(
        Type.Object(
          {
            id: Type.Optional(Type.Integer()),
            dev_mac: Type.String({ minLength: 1, maxLength: 64 }),
            event_id: Type.Integer({ minimum: 1 }),
            operator_email: Type.Optional(Type.Union([Email, Type.Null()])),
            archived: Type.Optional(Type.Boolean()),
            /** Stored as its SHA-256; null removes the key, absent keeps whatever is stored. */
            device_key: Type.Optional(
              Type.Union([Type.String({ minLength: 16, maxLength: 128 }), Type.Null()]),
            ),
          },
          strict,
        ),
      ),
    ),
    dashboard_users: Type.Optional(
      Type.Array(
        Type.Object(
          {
            id: Type.Optional(Type.Integer()),
            username: Type.String({ minLength: 1, maxLength: 100 }),
            password: Password,
            event_ids: Type.Optional(EventIds),
            /**
             * The ticket partner whose webhook deliveries the user sees, by the name its API keys give;
             * null unbinds, absent keeps whatever is stored (a new user: none).
             */
            partner: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 100 }), Type.Null()])),
          },
          strict,
        ),
      ),
    ),
  },
  strict,
)
export type SeedDocument = Type.Static<typeof SeedDocument>

export class SeedError extends Error {}

/** Checks a parsed seed document; throws SeedError listing every problem. */
export function parseSeed(doc: unknown): SeedDocument {
  if (Value.Check(SeedDocument, doc)) {
    const zones = (doc.events ?? []).flatMap((e, i) =>
      e.timezone !== undefined && !isTimeZone(e.timezone)
        ? [
            `/events/${i}/timezone: "${e.timezone}" is not a time zone of the zone database (such as Europe/Berlin or UTC); event ${e.uid}`,
          ]
        : [],
    )
    if (zones.length === 0) return doc
    throw new SeedError(`invalid seed document:\n${zones.map((p) => `  - ${p}`).join('\n')}`)
  }
  const problems = [...Value.Errors(SeedDocument, doc)]
    .slice(0, 20)
    .map((e) => `${e.instancePath || '/'}: ${e.message}`)
  throw new SeedError(`invalid seed document:\n${problems.map((p) => `  - ${p}`).join('\n')}`)
}

/**
 * Creates or updates the records of a seed document, matched by e-mail, phone, dev_mac, username or
 * event id/uid, in one transaction. Returns the document with every record's id filled in. A device
 * archived or given another key has its offline tokens ended in that transaction; `publish` then tells
 * the running instances at once (they read it from the database within REVOCATION_POLL_MS anyway).
 */
export async function applySeed(
  db: Db,
  clock: Clock,
  doc: SeedDocument,
  publish?: (revoked: Revocation[]) => Promise<void>,
): Promise<SeedDocument> {
  const now = clock.now()
  const revoked: Revocation[] = []
  // Hash outside the transaction: argon2 is slow and SQLite holds one writer at a time.
  const hashes = new Map<string, string>()
  const all = [
    ...(doc.administrators ?? []),
    ...(doc.network_managers ?? []),
    ...(doc.operators ?? []),
    ...(doc.customers ?? []),
    ...(doc.dashboard_users ?? []),
  ]
  for (const r of all)
    if (r.password && !hashes.has(r.password)) hashes.set(r.password, await hashPassword(r.password))
  const h = (p: string) => hashes.get(p)!
  const out: SeedDocument = structuredClone(doc)

  await db.transaction().execute(async (tx) => {
    for (const e of out.events ?? []) {
      e.timezone = e.timezone ?? 'UTC'
      e.id = await upsertEvent(tx, { id: e.id, uid: e.uid, name: e.name, timezone: e.timezone }, now)
    }
    for (const a of out.administrators ?? []) {
      const email = a.email.toLowerCase()
      const values = {
        password_hash: h(a.password),
        role: a.role,
        event_ids: (a.event_ids ?? []).join(','),
        updated_at: now,
      }
      a.id = await upsertAdministrator(tx, email, values, now)
    }
    for (const n of out.network_managers ?? []) {
      const email = n.email.toLowerCase()
      const values = { password_hash: h(n.password), event_ids: (n.event_ids ?? []).join(',') }
      n.id = await upsertNetworkManager(tx, email, values, now)
    }
    for (const o of out.operators ?? []) {
      const email = o.email.toLowerCase()
      const values = {
        password_hash: h(o.password),
        event_id: o.event_id,
        mode: o.mode ?? 0,
        permissions: o.permissions ? JSON.stringify(o.permissions) : null,
      }
      o.id = await upsertOperator(tx, email, values, now)
    }
    for (const c of out.customers ?? []) {
      const values = {
        password_hash: c.password ? h(c.password) : null,
        email: c.email?.toLowerCase() ?? null,
        first_name: c.first_name ?? null,
        last_name: c.last_name ?? null,
      }
      c.id = await upsertCustomerByPhone(tx, c.phone, values, now)
    }
    for (const d of out.devices ?? []) {
      let operatorId: number | null = null
      if (d.operator_email) {
        const op = await findOperatorByEmail(tx, d.operator_email)
        if (!op) throw new SeedError(`device ${d.dev_mac}: no operator with e-mail ${d.operator_email}`)
        operatorId = op.id
      }
      const values = {
        event_id: d.event_id,
        operator_id: operatorId,
        archived: d.archived ? 1 : 0,
        ...(d.device_key === undefined
          ? {}
          : { key_hash: d.device_key === null ? null : sha256Hex(d.device_key) }),
      }
      const { id, before } = await upsertDevice(tx, d.dev_mac, values, now)
      d.id = id
      // Archiving a device or changing its key ends the offline tokens it was issued.
      const archived = before?.archived === 0 && values.archived === 1
      const rekeyed = before !== undefined && 'key_hash' in values && values.key_hash !== before.key_hash
      if (archived || rekeyed) {
        const ended = await endDeviceTokens(tx, id, now)
        if (ended) revoked.push(ended)
      }
    }
    for (const u of out.dashboard_users ?? []) {
      const values = {
        password_hash: h(u.password),
        event_ids: (u.event_ids ?? []).join(','),
        ...(u.partner !== undefined ? { partner: u.partner } : {}),
      }
      u.id = await upsertDashboardUser(tx, u.username, values, now)
    }
  })
  if (publish && revoked.length > 0) await publish(revoked)
  return out
}
