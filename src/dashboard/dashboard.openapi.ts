/** What the OpenAPI document says about the dashboard operations beyond their route schemas. */

import {
  AT,
  creationOptions,
  EVENT,
  MFA_REQUIRED,
  requestOptions,
  TICKET_UID,
  TIMEZONE,
} from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

const dashboardUser = {
  id: 3,
  username: 'acme-box-office',
  event_ids: [1],
  partner: 'Acme Tickets',
  created_at: AT,
}

const STATS_FROM = 1784403000 // 2026-07-18T19:30:00Z

const usesPerBucket = [0, 2, 5, 9, 14, 21, 30, 26, 18, 11, 7, 4]

const eventStats = {
  event: { id: 1, uid: EVENT, name: 'Summer Festival 2026', timezone: TIMEZONE },
  generated_at: '2026-07-18T20:30:00.000Z',
  totals: {
    issued: 1200,
    claimed: 1038,
    used: 412,
    revenue: 179400,
    balance_loaded: 24000,
    promo_balance_loaded: 6000,
  },
  ticket_types: [
    {
      ticket_uid: TICKET_UID,
      name: 'Weekend pass',
      ticket_date: '2026-07-18T20:00:00.000',
      price: 149.5,
      issued: 1200,
      claimed: 1038,
      used: 412,
      revenue: 179400,
    },
  ],
  uses_over_time: {
    range: '1h',
    bucket_seconds: 300,
    from: '2026-07-18T19:30:00.000Z',
    to: '2026-07-18T20:30:00.000Z',
    total: usesPerBucket.reduce((a, b) => a + b, 0),
    points: usesPerBucket.map((count, i) => ({ t: STATS_FROM + i * 300, count })),
  },
  uses_per_gate: [
    { access_gate: 'North', count: 301 },
    { access_gate: 'South', count: 108 },
    { access_gate: null, count: 3 },
  ],
  webhook: {
    configured: true,
    url: 'https://partner.example.com/wristband/webhooks',
    disabled: false,
    disabled_reason: null,
    delivered: 409,
    pending: 2,
    failing: 1,
    failed: 0,
    last_error: { at: '2026-07-18T20:14:03.000Z', message: 'HTTP 503' },
  },
}

export const DASHBOARD_OPENAPI: FeatureOpenApi = {
  tags: {
    dashboard: 'Dashboard users and event figures (JSON)',
    'dashboard pages': 'The dashboard (HTML pages for browsers)',
  },
  operations: {
    'GET /events/{event_id}/stats': {
      operationId: 'getEventStats',
      returns: 'The figures of the event',
      response: eventStats,
    },
    'GET /dashboard/api/events/{event_id}/stats': {
      operationId: 'getDashboardEventStats',
      returns: 'The figures of the event',
      response: eventStats,
    },
    'GET /admin/dashboard-users': {
      operationId: 'listDashboardUsers',
      returns: 'The dashboard users',
      response: [dashboardUser],
    },
    'POST /admin/dashboard-users': {
      operationId: 'createDashboardUser',
      request: {
        username: 'acme-box-office',
        password: 'correct horse battery staple',
        event_ids: [1],
        partner: 'Acme Tickets',
      },
      returns: 'The dashboard user created',
      response: dashboardUser,
      errors: {
        ...MFA_REQUIRED,
        409: [{ code: 'username_taken', when: 'the username exists', detail: 'Username already taken' }],
      },
    },
    'PATCH /admin/dashboard-users/{user_id}': {
      operationId: 'updateDashboardUser',
      request: { event_ids: [1, 2], partner: null },
      returns: 'The dashboard user as changed',
      response: { ...dashboardUser, event_ids: [1, 2], partner: null },
      errors: MFA_REQUIRED,
    },
    'DELETE /admin/dashboard-users/{user_id}': {
      operationId: 'deleteDashboardUser',
      returns: 'The dashboard user is removed',
      response: { message: 'Dashboard user removed' },
      errors: MFA_REQUIRED,
    },
    'GET /dashboard/login': { operationId: 'getDashboardLoginPage', returns: 'The sign-in page' },
    'POST /dashboard/login': {
      operationId: 'dashboardLogin',
      returns: 'Signed in (to the event list), or, for an administrator whose MFA is on, on to the code step',
    },
    'GET /dashboard/login/code': { operationId: 'getDashboardCodeStepPage', returns: 'The TOTP step page' },
    'POST /dashboard/login/code': { operationId: 'dashboardLoginCode', returns: 'Signed in' },
    'GET /dashboard/login/passkey': {
      operationId: 'getDashboardPasskeyStepPage',
      returns: 'The passkey step page',
    },
    'POST /dashboard/login/passkey/options': {
      operationId: 'dashboardPasskeySignInOptions',
      returns: 'WebAuthn request options; the flow is in a cookie',
      response: { options: requestOptions },
    },
    'POST /dashboard/login/passkey': { operationId: 'dashboardLoginPasskey', returns: 'Signed in' },
    'GET /dashboard/passkeys': {
      operationId: 'getDashboardPasskeysPage',
      returns: "The account's passkeys page",
    },
    'POST /dashboard/passkeys/options': {
      operationId: 'dashboardPasskeyRegistrationOptions',
      returns: 'WebAuthn creation options; the flow is in a cookie',
      response: { options: creationOptions },
    },
    'POST /dashboard/passkeys': {
      operationId: 'dashboardAddPasskey',
      returns: 'Added: back to the passkeys page',
    },
    'POST /dashboard/passkeys/{id}/delete': {
      operationId: 'dashboardRemovePasskey',
      returns: 'Removed: back to the passkeys page',
    },
    'POST /dashboard/logout': { operationId: 'dashboardLogout', returns: 'Signed out' },
    'GET /dashboard': { operationId: 'getDashboardEventsPage', returns: 'The event list page' },
    'GET /dashboard/events/{event_id}': {
      operationId: 'getDashboardEventPage',
      returns: "The event's page",
    },
    'GET /dashboard/events/{event_id}/gate': {
      operationId: 'getDashboardGatePage',
      returns: "The page of the event's gate: inside now per check-in list, entries per hour",
    },
    'GET /dashboard/events/{event_id}/webhooks': {
      operationId: 'getDashboardWebhookDeliveriesPage',
      returns: "The page of the event's webhook deliveries",
    },
    'GET /dashboard/events/{event_id}/devices': {
      operationId: 'getDashboardDevicesPage',
      returns: "The page of the event's devices",
    },
    'POST /dashboard/events/{event_id}/devices/{device_id}/revoke': {
      operationId: 'dashboardRevokeDevice',
      returns: "The device's offline tokens are revoked; back to the devices page",
    },
    'POST /dashboard/events/{event_id}/webhooks/deliveries/{delivery_id}/resend': {
      operationId: 'dashboardResendWebhookDelivery',
      returns: 'Scheduled; back to the deliveries page',
    },
  },
}
