import { listEventSummaries } from '../events/events.store.js'
import { parseEventIds } from '../identities/grants.js'
import {
  findAdminById,
  findAdminSignIn,
  findNetworkManagerById,
  findNetworkManagerSignIn,
  updatePasswordHash,
} from '../identities/identities.store.js'
import type { Db } from '../platform/db/database.js'
import { type AccountSlot, passwordBudget } from '../platform/password-sign-in.js'
import { findDashboardUser, findDashboardUserSignIn, updateDashboardUser } from './dashboard-users.store.js'

/** The kinds of account that may sign in to the dashboard. */
export type ViewerKind = 'dashboard_user' | 'admin' | 'network_manager'

/** Who is looking at the dashboard, and which events they may see. */
export interface Viewer {
  kind: ViewerKind
  id: number
  /** Username or e-mail, shown in the page header. */
  label: string
  /** A superadmin sees every event. */
  allEvents: boolean
  eventIds: number[]
  /**
   * Whose webhook receiver and deliveries the viewer sees in its events (partners are isolated from
   * each other, docs/specification.md): `'all'` for administrators and network managers; for a
   * dashboard user the partner it is bound to, by name, or null when it is bound to none.
   */
  partners: PartnerScope
}

/** Every partner of the viewer's events, the partner of this name in each of them, or none. */
export type PartnerScope = 'all' | { name: string } | null

/** The partners of an event a viewer may see, from the event's partners (the order is kept). */
export function visiblePartners<P extends { name: string }>(viewer: Viewer, partners: P[]): P[] {
  const scope = viewer.partners
  if (scope === 'all') return partners
  return scope === null ? [] : partners.filter((p) => p.name === scope.name)
}

export interface DashboardAccount {
  viewer: Viewer
  password_hash: string
  /** The step after the password, for an administrator whose MFA is on. */
  secondStep: SecondStep | null
}

/** What a sign-in asks after the password: a TOTP code, or a passkey (PASSKEYS_REQUIRED_FOR). */
export type SecondStep = 'totp' | 'passkey'

/**
 * The accounts a sign-in name may belong to, one slot per kind: dashboard users by username,
 * administrators and network managers by e-mail, in that order. Usually one exists; when the same text
 * names accounts of several kinds the password decides which one signs in. Each slot spends its
 * account's own back-off budget, the one `/auth/login` spends for administrators and network managers.
 * Administrators and network managers always have an e-mail address (the seed file and the command
 * line refuse others), so a name without `@` has one slot: the slots, and so the work of an attempt,
 * follow from the form of the name alone, never from which accounts exist.
 */
export function accountSlots(db: Db, name: string): AccountSlot<DashboardAccount>[] {
  const username = name.trim()
  const email = username.toLowerCase()
  const user: AccountSlot<DashboardAccount> = {
    backoffKey: passwordBudget('dashboard_user', username),
    find: async () => {
      const r = await findDashboardUserSignIn(db, username)
      return r && { viewer: dashboardUserViewer(r), password_hash: r.password_hash, secondStep: null }
    },
    storeHash: (a, hash) => updateDashboardUser(db, a.viewer.id, { password_hash: hash }),
  }
  if (!email.includes('@')) return [user]
  return [
    user,
    {
      backoffKey: passwordBudget('admin', email),
      find: async () => {
        const r = await findAdminSignIn(db, email)
        return (
          r && {
            viewer: adminViewer(r),
            password_hash: r.password_hash,
            secondStep: r.mfa_enabled ? 'totp' : null,
          }
        )
      },
      storeHash: (a, hash) => updatePasswordHash(db, 'admin', a.viewer.id, hash),
    },
    {
      backoffKey: passwordBudget('network_manager', email),
      find: async () => {
        const r = await findNetworkManagerSignIn(db, email)
        return r && { viewer: managerViewer(r), password_hash: r.password_hash, secondStep: null }
      },
      storeHash: (a, hash) => updatePasswordHash(db, 'network_manager', a.viewer.id, hash),
    },
  ]
}

/**
 * Reloads a signed-in account on every request, so a removed account, a disabled administrator, a
 * narrowed event list or a dashboard user's changed partner takes effect at once rather than when the
 * session ends.
 */
export async function loadViewer(db: Db, kind: string, id: number): Promise<Viewer | null> {
  switch (kind) {
    case 'dashboard_user': {
      const r = await findDashboardUser(db, id)
      return r ? dashboardUserViewer(r) : null
    }
    case 'admin': {
      const r = await findAdminById(db, id)
      return r ? adminViewer(r) : null
    }
    case 'network_manager': {
      const r = await findNetworkManagerById(db, id)
      return r ? managerViewer(r) : null
    }
    default:
      return null
  }
}

export function canSeeEvent(viewer: Viewer, eventId: number): boolean {
  return viewer.allEvents || viewer.eventIds.includes(eventId)
}

/** The events a viewer may see, in name order. */
export async function visibleEvents(db: Db, viewer: Viewer) {
  return listEventSummaries(db, viewer.allEvents ? 'all' : viewer.eventIds)
}

function dashboardUserViewer(r: {
  id: number
  username: string
  event_ids: string
  partner: string | null
}): Viewer {
  return {
    kind: 'dashboard_user',
    id: r.id,
    label: r.username,
    allEvents: false,
    eventIds: parseEventIds(r.event_ids),
    partners: r.partner === null ? null : { name: r.partner },
  }
}

function adminViewer(r: { id: number; email: string; role: string; event_ids: string }): Viewer {
  return {
    kind: 'admin',
    id: r.id,
    label: r.email,
    allEvents: r.role === 'superadmin',
    eventIds: parseEventIds(r.event_ids),
    partners: 'all',
  }
}

function managerViewer(r: { id: number; email: string; event_ids: string }): Viewer {
  return {
    kind: 'network_manager',
    id: r.id,
    label: r.email,
    allEvents: false,
    eventIds: parseEventIds(r.event_ids),
    partners: 'all',
  }
}
