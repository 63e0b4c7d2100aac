import { parseEventIds } from '../identities/grants.js'
import { findAdminProfile } from '../identities/identities.store.js'
import type { Db } from '../platform/db/database.js'
import { UnauthorizedError } from '../platform/errors.js'

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
