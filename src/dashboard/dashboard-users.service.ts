import type { AuditLog } from '../audit/audit.store.js'
import { missingEvents } from '../events/events.store.js'
import { parseEventIds } from '../identities/grants.js'
import { storedGrant } from '../identities/identities.store.js'
import { removeAllPasskeys } from '../passkeys/passkeys.service.js'
import { changePassword } from '../password-reset/password-change.service.js'
import type { Clock } from '../platform/clock.js'
import { type Db, isUniqueViolation } from '../platform/db/database.js'
import { ConflictError, ForbiddenError, NotFoundError } from '../platform/errors.js'
import { hashPassword } from '../platform/passwords.js'
import type { EndSessions } from '../tokens/authority.js'
import { type Claims, isSuperadmin } from '../tokens/claims.js'
import {
  type DashboardUserRecord,
  deleteDashboardUser,
  findDashboardUser,
  insertDashboardUser,
  listDashboardUsers,
  updateDashboardUser,
} from './dashboard-users.store.js'

// A dashboard user by username (`wristband admin reset-passkeys --dashboard-user`; undefined when none):
// the store's read, re-exported (a function that only renames a store call is not kept).
export { findDashboardUserSignIn } from './dashboard-users.store.js'

export interface DashboardUsersDeps {
  db: Db
  clock: Clock
  audit: AuditLog
  /** The token authority's: a new password or a removal ends the account's sessions in its transaction. */
  endSessions: EndSessions
}

function view(r: DashboardUserRecord) {
  return {
    id: r.id,
    username: r.username,
    event_ids: parseEventIds(r.event_ids),
    partner: r.partner,
    created_at: new Date(r.created_at).toISOString(),
  }
}

/**
 * Dashboard accounts for partners, managed by superadmins (the seed file creates them too). Changing
 * a password or removing an account ends its open dashboard sessions. Every change is audited.
 *
 * `partner` binds the account to a ticket partner by name (the name its API keys give, in each of the
 * account's events): the deliveries page shows it that partner's receiver and deliveries only, and
 * none while it is bound to no partner. The partner need not exist yet (its first API key creates it).
 */
export class DashboardUsersService {
  constructor(private readonly deps: DashboardUsersDeps) {}

  /** The account as stored now decides, not the token: these routes create and change passwords. */
  private async superadminOnly(claims: Claims): Promise<void> {
    if (!isSuperadmin(await storedGrant(this.deps.db, claims)))
      throw new ForbiddenError('Only a superadmin manages dashboard users')
  }

  private async assertEventsExist(ids: number[]): Promise<void> {
    const missing = await missingEvents(this.deps.db, ids)
    if (missing.length > 0) throw new NotFoundError(`Unknown event ids: ${missing.join(', ')}`)
  }

  private async assertExists(id: number): Promise<void> {
    if (!(await findDashboardUser(this.deps.db, id))) throw new NotFoundError('Dashboard user not found')
  }

  async list(claims: Claims) {
    await this.superadminOnly(claims)
    return (await listDashboardUsers(this.deps.db)).map(view)
  }

  async create(
    claims: Claims,
    input: { username: string; password: string; event_ids: number[]; partner?: string | null },
    ip: string,
  ) {
    await this.superadminOnly(claims)
    const { username, password, event_ids } = input
    const partner = input.partner ?? null
    await this.assertEventsExist(event_ids)
    let created: DashboardUserRecord
    try {
      created = await insertDashboardUser(this.deps.db, {
        username,
        password_hash: await hashPassword(password),
        event_ids: event_ids.join(','),
        partner,
        created_at: this.deps.clock.now(),
      })
    } catch (err) {
      if (isUniqueViolation(err)) throw new ConflictError('Username already taken', 'username_taken')
      throw err
    }
    await this.deps.audit.record({
      kind: 'dashboard_user_created',
      actor: `admin:${claims.sub}`,
      ip,
      outcome: 'success',
      detail: { dashboard_user_id: created.id, event_ids, partner },
    })
    return view(created)
  }

  /** Changes what is given; `partner: null` unbinds the account from its partner. */
  async update(
    claims: Claims,
    id: number,
    input: { password?: string; event_ids?: number[]; partner?: string | null },
    ip: string,
  ) {
    await this.superadminOnly(claims)
    const { db } = this.deps
    const { password, event_ids, partner } = input
    await this.assertExists(id)
    if (event_ids) await this.assertEventsExist(event_ids)
    const passwordHash = password ? await hashPassword(password) : undefined
    const ended = await db.transaction().execute(async (tx) => {
      const values = {
        ...(event_ids ? { event_ids: event_ids.join(',') } : {}),
        ...(partner !== undefined ? { partner } : {}),
      }
      if (Object.keys(values).length > 0) await updateDashboardUser(tx, id, values)
      if (!passwordHash) return undefined
      return changePassword(tx, this.deps, {
        owner: { kind: 'dashboard_user', id },
        passwordHash,
        way: 'dashboard',
        now: this.deps.clock.now(),
      })
    })
    await ended?.publish()
    await this.deps.audit.record({
      kind: 'dashboard_user_updated',
      actor: `admin:${claims.sub}`,
      ip,
      outcome: 'success',
      detail: {
        dashboard_user_id: id,
        password_changed: Boolean(password),
        event_ids,
        ...(partner !== undefined ? { partner } : {}),
      },
    })
    return view((await findDashboardUser(db, id))!)
  }

  /** Removes the account and ends its sessions, together. */
  async remove(claims: Claims, id: number, ip: string): Promise<void> {
    await this.superadminOnly(claims)
    await this.assertExists(id)
    await this.deps.db.transaction().execute(async (tx) => {
      await this.deps.endSessions(tx, 'dashboard_user', id)
      await removeAllPasskeys(tx, { kind: 'dashboard_user', id })
      await deleteDashboardUser(tx, id)
    })
    await this.deps.audit.record({
      kind: 'dashboard_user_deleted',
      actor: `admin:${claims.sub}`,
      ip,
      outcome: 'success',
      detail: { dashboard_user_id: id },
    })
  }
}
