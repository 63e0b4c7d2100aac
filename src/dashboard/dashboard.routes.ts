import cookie from '@fastify/cookie'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { MfaFreshness, ProtectCredentials } from '../mfa/fresh-mfa.js'
import type { EndSessions } from '../tokens/authority.js'
import type { RevocationStore } from '../tokens/revocations.js'
import type { TokenService } from '../tokens/token.service.js'
import { dashboardUsersRoutes } from './dashboard-users.routes.js'
import { deliveriesPageRoutes } from './deliveries.routes.js'
import { devicesPageRoutes } from './devices.routes.js'
import { eventPagesRoutes } from './events.routes.js'
import { gatePageRoutes } from './gate.routes.js'
import { pageContext } from './kit/context.js'
import { passkeyPageRoutes } from './passkeys.routes.js'
import type { SessionDeps } from './session.service.js'
import { signInRoutes } from './sign-in.routes.js'
import { statsRoutes } from './stats.routes.js'

export interface DashboardDeps extends SessionDeps {
  tokens: TokenService
  /** How long a second factor counts as fresh: adding or removing a passkey needs one. */
  freshness: MfaFreshness
  /** The guard of the dashboard-user routes, which create accounts (fresh MFA while it is on). */
  protectCredentials: ProtectCredentials
  /** Runs due jobs now (a resend from the deliveries page goes out at once). */
  runDueJobs?: () => void
  /** The token authority's way to end an account's sessions (dashboard users). */
  endSessions: EndSessions
  /** The revocation list: a device revoked on the devices page ends its tokens on every instance at once. */
  revocations: Pick<RevocationStore, 'revoke'>
}

/**
 * The web dashboard (`/dashboard`, session cookie) and the same figures for bearer tokens at
 * `GET /events/{event_id}/stats`. Three contexts: the bearer API and the dashboard's JSON keep the
 * JSON error bodies; the pages, each a plugin of its own declared with the page kit (`kit/`), answer
 * errors with pages and carry their own CSP (`pageContext`).
 */
export const dashboardRoutes: FastifyPluginAsyncTypebox<DashboardDeps> = async (app, deps) => {
  await app.register(cookie)
  app.decorateRequest('dashboardSession', null)

  await app.register(statsRoutes, deps)
  await app.register(dashboardUsersRoutes, deps)
  await app.register(async (pages) => {
    await pageContext(pages)
    await pages.register(signInRoutes, deps)
    await pages.register(eventPagesRoutes, deps)
    await pages.register(passkeyPageRoutes, deps)
    await pages.register(devicesPageRoutes, {
      ...deps,
      publishRevocation: (entry) => deps.revocations.revoke([entry]),
    })
    await pages.register(deliveriesPageRoutes, { ...deps, runDueJobs: deps.runDueJobs ?? (() => {}) })
    await pages.register(gatePageRoutes, deps)
  })
}
