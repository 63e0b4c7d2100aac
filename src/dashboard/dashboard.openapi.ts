/**
 * The dashboard feature's OpenAPI texts that are no one route's: its tags' descriptions and the example
 * values and error cases its routes share. Each route's own texts (operationId, what it answers, examples,
 * `error` codes) are in its schema's `doc`.
 */

import { AT, EVENT, TICKET_UID, TIMEZONE } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const dashboardUser = {
  id: 3,
  username: 'acme-box-office',
  event_ids: [1],
  partner: 'Acme Tickets',
  created_at: AT,
}

const STATS_FROM = 1784403000 // 2026-07-18T19:30:00Z

const usesPerBucket = [0, 2, 5, 9, 14, 21, 30, 26, 18, 11, 7, 4]

export const eventStats = {
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
}
