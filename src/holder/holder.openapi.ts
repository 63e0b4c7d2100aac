/**
 * The holder feature's OpenAPI texts that are no one route's: its tags' descriptions, path-parameter
 * examples and the example values and error cases its routes share. Each route's own texts (operationId,
 * what it answers, examples, `error` codes) are in its schema's `doc`.
 */

import { EVENT, TICKET_CODE, TICKET_UID, TIMEZONE, TRANSFER_UID } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

const CLAIM_TOKEN = 'q3L1v0Zk8m2QxT7bR5yN9pWc4HdJfGsA6eUoKiYtV1w'

export const holderTicket = {
  transfer_uid: TRANSFER_UID,
  event_uid: EVENT,
  event_name: 'Summer Festival 2026',
  ticket_uid: TICKET_UID,
  name: 'Weekend pass',
  ticket_date: '2026-07-18T20:00:00.000',
  status: 'CLAIMED',
  used_timestamp: null,
  used_at: null,
  event_timezone: TIMEZONE,
  access_gate: 'North',
  seat_number: null,
  balance: 20,
  promo_balance: 5,
  ticket_code: TICKET_CODE,
}

export const linkView = {
  event_uid: EVENT,
  event_name: 'Summer Festival 2026',
  email: 'holder@example.com',
  claimed: true,
  tickets: [holderTicket],
}

export const HOLDER_OPENAPI: FeatureOpenApi = {
  tags: {
    holder: 'Ticket holders: claim links from the transfer e-mail',
  },
  params: { token: CLAIM_TOKEN },
}
