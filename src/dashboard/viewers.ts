import { listEventSummaries } from '../events/events.store.js'
import { parseEventIds } from '../identities/grants.js'
import {
  findAdminById,
  findAdminSignIn,
  findNetworkManagerById,
  findNetworkManagerSignIn,
} from '../identities/identities.store.js'
import type { Db } from '../platform/db/database.js'
import { findDashboardUser, findDashboardUserSignIn } from './dashboard-users.store.js'

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
}

export interface DashboardAccount {
  viewer: Viewer
  password_hash: string
}

/**
 * The accounts a sign-in name may belong to: dashboard users by username, administrators and
 * network managers by e-mail. Usually one; several only when the same text names accounts of
 * different kinds, and then the password decides which one signs in.
 */
export async function findAccounts(db: Db, name: string): Promise<DashboardAccount[]> {
  const email = name.trim().toLowerCase()
  const [user, admin, manager] = await Promise.all([
    findDashboardUserSignIn(db, name.trim()),
    findAdminSignIn(db, email),
    findNetworkManagerSignIn(db, email),
  ])
  const out: DashboardAccount[] = []
  if (user) out.push({ viewer: dashboardUserViewer(user), password_hash: user.password_hash })
  if (admin) out.push({ viewer: adminViewer(admin), password_hash: admin.password_hash })
  if (manager) out.push({ viewer: managerViewer(manager), password_hash: manager.password_hash })
  return out
}

/**
 * Reloads a signed-in account on every request, so a removed account, a disabled administrator or a
 * narrowed event list takes effect at once rather than when the session ends.
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

function dashboardUserViewer(r: { id: number; username: string; event_ids: string }): Viewer {
  return {
    kind: 'dashboard_user',
    id: r.id,
    label: r.username,
    allEvents: false,
    eventIds: parseEventIds(r.event_ids),
  }
}

function adminViewer(r: { id: number; email: string; role: string; event_ids: string }): Viewer {
  return {
    kind: 'admin',
    id: r.id,
    label: r.email,
    allEvents: r.role === 'superadmin',
    eventIds: parseEventIds(r.event_ids),
  }
}

function managerViewer(r: { id: number; email: string; event_ids: string }): Viewer {
  return {
    kind: 'network_manager',
    id: r.id,
    label: r.email,
    allEvents: false,
    eventIds: parseEventIds(r.event_ids),
  }
}
