import { missingEvents } from '../events/events.store.js'
import { parseEventIds } from '../identities/grants.js'
import {
  type AdminSummary,
  clearAdminMfa,
  findAdminProfile,
  insertAdministrator,
  MFA_COLUMNS,
} from '../identities/identities.store.js'
import { type Db, isUniqueViolation } from '../platform/db/database.js'
import { UnauthorizedError } from '../platform/errors.js'

export type { AdminSummary } from '../identities/identities.store.js'

export interface AdminServiceDeps {
  db: Db
}

/** The administrator's own account, as the `/admin/...` routes show it. */
export class AdminService {
  constructor(private readonly deps: AdminServiceDeps) {}

  /** The profile of a signed-in administrator; 401 when the account is gone or disabled since sign-in. */
  async profile(adminId: number) {
    const r = await findAdminProfile(this.deps.db, adminId)
    if (!r) throw new UnauthorizedError()
    return {
      id: r.id,
      email: r.email,
      role: r.role,
      event_ids: parseEventIds(r.event_ids),
      is_two_factor_authentication_enabled: r.is_two_factor_authentication_enabled === 1,
      created_at: new Date(r.created_at).toISOString(),
    }
  }
}

// Break-glass administration (`wristband admin ...`): any administrator, disabled ones included, each
// step in the caller's transaction (the command's audited one). Ending the account's sessions is the
// token authority's `endSessions`, which the caller adds to the same transaction.

// The reads and the switch that are one store call each are the store's own, re-exported: an administrator
// by e-mail or id (disabled or not), a network manager (whose passkeys `wristband admin reset-passkeys`
// removes), an operator (whose tokens `wristband admin end-tokens --operator` ends), and disabling (1)
// or enabling (0) an administrator. A function that only renames a store call is not kept.
export {
  findAdministrator,
  findNetworkManagerSignIn,
  findOperatorByEmail,
  setAdminDisabled,
} from '../identities/identities.store.js'

/**
 * Creates an administrator of the given events (none for a superadmin): its id, or why not (event ids
 * that name no event, or an e-mail address another administrator has).
 */
export async function createAdministrator(
  tx: Db,
  input: {
    email: string
    passwordHash: string
    role: 'admin' | 'superadmin'
    eventIds: number[]
    now: number
  },
): Promise<{ id: number } | { missingEvents: number[] } | { emailTaken: true }> {
  const missing = await missingEvents(tx, input.eventIds)
  if (missing.length) return { missingEvents: missing }
  try {
    const id = await insertAdministrator(tx, {
      email: input.email,
      password_hash: input.passwordHash,
      role: input.role,
      event_ids: input.eventIds.join(','),
      created_at: input.now,
      updated_at: input.now,
    })
    return { id }
  } catch (err) {
    if (isUniqueViolation(err)) return { emailTaken: true }
    throw err
  }
}

/** Switches MFA off and forgets its secrets, so the administrator enrols again; returns what it cleared. */
export async function resetAdministratorMfa(tx: Db, admin: AdminSummary, now: number) {
  await clearAdminMfa(tx, admin.id, now)
  return MFA_COLUMNS
}
