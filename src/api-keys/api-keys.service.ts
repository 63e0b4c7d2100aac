import type { AuditLog } from '../audit/audit.store.js'
import { eventExists } from '../events/events.store.js'
import { storedGrant } from '../identities/identities.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { ForbiddenError, NotFoundError } from '../platform/errors.js'
import { type Claims, hasScope } from '../tokens/claims.js'
import type { Revocation } from '../tokens/revocations.js'
import type { TokenService } from '../tokens/token.service.js'
import { apiKeyClaims } from './api-key.credential.js'
import { API_KEY_REVOCATION_MS, apiKeyJti } from './api-key-cache.js'
import {
  type ApiKeyRecord,
  createApiKey,
  findLiveApiKey,
  getApiKey,
  listApiKeys,
  partnerNames,
  revokeApiKey,
} from './api-keys.store.js'

// The reads the command line needs, as the store has them (the CLI calls services only; a function
// that would only rename a store call is not written).
export { getApiKey, listApiKeys } from './api-keys.store.js'

export interface ApiKeyServiceDeps {
  db: Db
  clock: Clock
  tokens: TokenService
  audit: AuditLog
}

/** Managing an event's API keys is part of managing the event. */
const MANAGE = 'events:manage'

function requireEventAccess(claims: Pick<Claims, 'permissions'>, eventId: number): void {
  if (!hasScope(claims, eventId, MANAGE)) throw new ForbiddenError()
}

/**
 * Creates a key for an event (its plaintext exists only in this answer); null when there is no such
 * event. The route and `wristband apikey create` both create through it.
 */
export async function createKeyForEvent(db: Db, input: Parameters<typeof createApiKey>[1]) {
  if (!(await eventExists(db, input.event_id))) return null
  return createApiKey(db, input)
}

/**
 * Revokes an API key in `db` (the caller's transaction): its stored hash is cleared, so every later
 * check refuses it. Returns the revocation entry that makes running instances drop a cached copy at
 * once, to be published after the commit, or null when the key was revoked already. The route and
 * `wristband apikey revoke` both revoke through it.
 */
export async function revokeKey(db: Db, id: number, now: number): Promise<Revocation | null> {
  if (!(await revokeApiKey(db, id, now))) return null
  return { jti: apiKeyJti(id), expiresAt: now + API_KEY_REVOCATION_MS }
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

const listItem = (k: ApiKeyRecord, partners: Map<number, string>) => ({
  id: k.id,
  name: k.name,
  prefix: k.key_prefix,
  event_id: k.event_id,
  partner: (k.partner_id !== null ? partners.get(k.partner_id) : undefined) ?? '',
  scopes: k.scopes,
  created_at: new Date(k.created_at).toISOString(),
  last_used_at: iso(k.last_used_at),
  revoked_at: iso(k.revoked_at),
})

/** An event's API keys, managed by the administrators of the event; every change is audited. */
export class ApiKeyService {
  constructor(private readonly deps: ApiKeyServiceDeps) {}

  private async requireEvent(eventId: number): Promise<void> {
    if (!(await eventExists(this.deps.db, eventId))) throw new NotFoundError('Event not found')
  }

  /** A new key; its plaintext exists only in this answer. */
  async create(
    claims: Claims,
    input: { event_id: number; name: string; scopes: string[]; partner?: string | undefined },
    ip: string,
  ) {
    const { db, clock, audit } = this.deps
    const { event_id, name, scopes } = input
    // The key never expires: the account and its grant as stored now decide, not the token's claims.
    requireEventAccess(await storedGrant(db, claims), event_id)
    const actor = `admin:${claims.sub}`
    const created = await createKeyForEvent(db, {
      event_id,
      name,
      scopes,
      created_by: actor,
      now: clock.now(),
      partner: input.partner,
    })
    if (!created) throw new NotFoundError('Event not found')
    const { record, plaintext, partner } = created
    await audit.record({
      kind: 'api_key_created',
      actor,
      ip,
      outcome: 'success',
      detail: { key_id: record.id, event_id, name, scopes, partner },
    })
    return {
      id: record.id,
      api_key: plaintext,
      name: record.name,
      event_id: record.event_id,
      partner,
      scopes: record.scopes,
      created_at: new Date(record.created_at).toISOString(),
    }
  }

  /** Revokes a key (again: no change) and tells the token guard, so verify calls it invalid at once. */
  async revoke(claims: Claims, keyId: number, ip: string): Promise<void> {
    const { db, clock, audit, tokens } = this.deps
    const key = await getApiKey(db, keyId)
    if (!key) throw new NotFoundError('API key not found')
    requireEventAccess(claims, key.event_id)
    const revoked = await revokeKey(db, key.id, clock.now())
    if (revoked) {
      await tokens.revokeCredential(revoked.jti, API_KEY_REVOCATION_MS)
      await audit.record({
        kind: 'api_key_revoked',
        actor: `admin:${claims.sub}`,
        ip,
        outcome: 'success',
        detail: { key_id: key.id, event_id: key.event_id },
      })
    }
  }

  /**
   * Revokes a key on behalf of whoever presents it (POST /oauth2/revoke: possession is the authority,
   * so a key found where it should not be can be ended by its finder). Its claims, or null when it was
   * no live key. The caller audits.
   */
  async revokePresented(plaintext: string): Promise<Claims | null> {
    const { db, clock, tokens } = this.deps
    const key = await findLiveApiKey(db, plaintext)
    if (!key) return null
    const now = clock.now()
    const revoked = await revokeKey(db, key.id, now)
    if (!revoked) return null
    await tokens.revokeCredential(revoked.jti, API_KEY_REVOCATION_MS)
    return apiKeyClaims(key, now)
  }

  /** An event's keys, revoked ones included, without secrets. */
  async list(claims: Claims, eventId: number) {
    requireEventAccess(claims, eventId)
    await this.requireEvent(eventId)
    const keys = await listApiKeys(this.deps.db, eventId)
    const partners = await partnerNames(this.deps.db, [
      ...new Set(keys.flatMap((k) => (k.partner_id !== null ? [k.partner_id] : []))),
    ])
    return keys.map((k) => listItem(k, partners))
  }
}
