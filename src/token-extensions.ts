/**
 * The token authority's extensions that are not a feature plugin's own, in one place, so that the app
 * (`src/app.ts`) and the command line (`cli/command.ts`) build the authority alike. Every way a feature
 * extends token issuing, checking and ending is listed in docs/architecture.md ("Token-authority
 * extensions"); the credential resolvers and logout listeners are registered inside their plugins.
 */
import { endDashboardSessions } from './dashboard/session.service.js'
import type { SessionStore } from './tokens/authority.js'

/** The sessions that end with an account's tokens (`endSessions`): the dashboard's. */
export const SESSION_STORES: readonly SessionStore[] = [endDashboardSessions]
