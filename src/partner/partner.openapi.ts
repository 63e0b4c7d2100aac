/**
 * The partner feature's OpenAPI texts that are no one route's: its tags' descriptions, path-parameter
 * examples and the example values and error cases its routes share. Each route's own texts (operationId,
 * what it answers, examples, `error` codes) are in its schema's `doc`.
 */

import { AT, EVENT, TICKET_CODE, TICKET_UID, TIMEZONE, TRANSFER_UID } from '../platform/openapi-examples.js'
import type { ErrorCase, FeatureOpenApi } from '../platform/openapi-operations.js'

export const idempotencyInUse: ErrorCase = {
  code: 'idempotency_key_in_use',
  when: 'a request with the same Idempotency-Key is still being processed; retry shortly',
  detail: 'A request with this Idempotency-Key is still being processed',
}

export const ticketType = {
  ticket_uid: TICKET_UID,
  event_uid: EVENT,
  event_timezone: TIMEZONE,
  name: 'Weekend pass',
  price: 149.5,
  ticket_date: '2026-07-18T20:00:00.000',
  created_at: AT,
}

/** A transfer as the partner API answers it. */
export const transferView = {
  transfer_uid: TRANSFER_UID,
  ticket_uid: TICKET_UID,
  company_ticket_id: 'order-1042-1',
  email: 'holder@example.com',
  status: 'TRANSFERRED',
  event_timezone: TIMEZONE,
  created_at: AT,
  ticket_code: TICKET_CODE,
}

export const PARTNER_OPENAPI: FeatureOpenApi = {
  tags: {
    partner: 'Ticket partners (API key in the `api_key` header): the ticket catalogue and transfers',
  },
  params: { company_ticket_id: 'order-1042-1' },
}
