/**
 * What a staff or consumer account may do, built from its stored record: the baseline scopes of each role
 * and the grant a token carries. Owned by identities (which stores the accounts); tokens import it.
 */

/** Scopes granted to each role when no narrower stored permission applies (docs/specification.md). */
export const BASELINE_SCOPES = {
  admin: [
    'events:manage',
    'reports:read',
    'reports:write',
    'devices:manage',
    'users:manage',
    'billing:manage',
  ],
  operator: [
    'pos:sell',
    'pos:refund',
    'topup:balance',
    'checkin:nfc',
    'checkin:manual',
    'checkin:fastpass',
    'ticket:sell',
    'ticket:scan',
  ],
  network_manager: ['events:manage', 'reports:read', 'devices:manage', 'users:manage'],
  consumer: ['wallet:read', 'wallet:topup', 'profile:read', 'profile:write'],
  device: ['pos:sell', 'pos:refund', 'sync:upload', 'sync:download'],
  event_client: ['api:read', 'api:write'],
} as const

export type Role = 'admin' | 'operator' | 'network_manager' | 'consumer' | 'event_client'
/** Event id (as a string) or "*" for every event, to the scopes held there. */
export type Permissions = Record<string, string[]>

/** The part of the access claims that comes from the stored records. */
export interface Grant {
  sub: string
  role: Role
  event_ids: number[]
  permissions: Permissions
  /**
   * The account's token generation when the grant was read (`token_generation`): every token minted
   * from it carries it, and one minted under a generation that has ended since is refused.
   */
  account_gen: number
}

export function parseEventIds(csv: string): number[] {
  return csv
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map(Number)
    .filter(Number.isInteger)
}

/** An account's id and token generation, as every grant builder reads them. */
interface AccountRecord {
  id: number
  token_generation: number
}

export function adminGrant(rec: AccountRecord & { role: string; event_ids: string }): Grant {
  const scopes = [...BASELINE_SCOPES.admin]
  const account_gen = rec.token_generation
  if (rec.role === 'superadmin')
    return { sub: String(rec.id), role: 'admin', event_ids: [], permissions: { '*': scopes }, account_gen }
  const ids = parseEventIds(rec.event_ids)
  return {
    sub: String(rec.id),
    role: 'admin',
    event_ids: ids,
    permissions: Object.fromEntries(ids.map((id) => [String(id), [...scopes]])),
    account_gen,
  }
}

export function networkManagerGrant(rec: AccountRecord & { event_ids: string }): Grant {
  const ids = parseEventIds(rec.event_ids)
  return {
    sub: String(rec.id),
    role: 'network_manager',
    event_ids: ids,
    permissions: Object.fromEntries(ids.map((id) => [String(id), [...BASELINE_SCOPES.network_manager]])),
    account_gen: rec.token_generation,
  }
}

export function operatorGrant(
  rec: AccountRecord & { event_id: number | null; permissions: string | null },
): Grant {
  const eventIds = rec.event_id === null ? [] : [rec.event_id]
  let permissions: Permissions = {}
  if (rec.permissions) permissions = JSON.parse(rec.permissions) as Permissions
  else if (rec.event_id !== null) permissions = { [String(rec.event_id)]: [...BASELINE_SCOPES.operator] }
  return {
    sub: String(rec.id),
    role: 'operator',
    event_ids: eventIds,
    permissions,
    account_gen: rec.token_generation,
  }
}

export function consumerGrant(rec: AccountRecord): Grant {
  return {
    sub: String(rec.id),
    role: 'consumer',
    event_ids: [],
    permissions: { '*': [...BASELINE_SCOPES.consumer] },
    account_gen: rec.token_generation,
  }
}
