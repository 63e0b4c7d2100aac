/**
 * The OpenAPI texts of every feature that are no one route's (tag descriptions, path-parameter examples,
 * the `webhooks` the service sends), each in `src/<feature>/<feature>.openapi.ts`; a route's own texts
 * (operationId, success description, examples, `error` codes) are in its schema's `doc`. `buildApp` hands
 * the list to the platform's document builder (platform/openapi.ts), which refuses a key two features give.
 */
import { ADMIN_OPENAPI } from './admin/admin.openapi.js'
import { API_KEYS_OPENAPI } from './api-keys/api-keys.openapi.js'
import { AUDIT_OPENAPI } from './audit/audit.openapi.js'
import { AUTH_OPENAPI } from './auth/auth.openapi.js'
import { CHECKIN_OPENAPI } from './checkin/checkin.openapi.js'
import { CONSUMERS_OPENAPI } from './consumers/consumers.openapi.js'
import { DASHBOARD_OPENAPI } from './dashboard/dashboard.openapi.js'
import { DEVICES_OPENAPI } from './devices/devices.openapi.js'
import { EDGE_OPENAPI } from './edge/edge.openapi.js'
import { HEALTH_OPENAPI } from './health/health.openapi.js'
import { HOLDER_OPENAPI } from './holder/holder.openapi.js'
import { METRICS_OPENAPI } from './metrics/metrics.openapi.js'
import { MFA_OPENAPI } from './mfa/mfa.openapi.js'
import { OAUTH2_OPENAPI } from './oauth2/oauth2.openapi.js'
import { PARTNER_OPENAPI } from './partner/partner.openapi.js'
import { PASSKEYS_OPENAPI } from './passkeys/passkeys.openapi.js'
import { PASSWORD_RESET_OPENAPI } from './password-reset/password-reset.openapi.js'
import type { FeatureOpenApi } from './platform/openapi-operations.js'
import { TICKETS_OPENAPI } from './tickets/tickets.openapi.js'
import { TOKENS_OPENAPI } from './tokens/tokens.openapi.js'
import { WEBHOOKS_OPENAPI } from './webhooks/webhooks.openapi.js'

/**
 * The version of the interface the document describes (`info.version`): 0.1.0, the specification's. It
 * changes when the interface does, not with each release; the release serving it is `info.x-release`
 * (package.json's version, also told by `wristband --version`, `GET /` and `wristband_build_info`).
 */
export const INTERFACE_VERSION = '0.1.0'

export const FEATURE_OPENAPI: readonly FeatureOpenApi[] = [
  HEALTH_OPENAPI,
  METRICS_OPENAPI,
  AUTH_OPENAPI,
  TOKENS_OPENAPI,
  OAUTH2_OPENAPI,
  EDGE_OPENAPI,
  ADMIN_OPENAPI,
  MFA_OPENAPI,
  PASSKEYS_OPENAPI,
  PASSWORD_RESET_OPENAPI,
  API_KEYS_OPENAPI,
  AUDIT_OPENAPI,
  DASHBOARD_OPENAPI,
  CONSUMERS_OPENAPI,
  DEVICES_OPENAPI,
  TICKETS_OPENAPI,
  CHECKIN_OPENAPI,
  HOLDER_OPENAPI,
  PARTNER_OPENAPI,
  WEBHOOKS_OPENAPI,
]
