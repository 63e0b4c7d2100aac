/** What the OpenAPI document says about the holder operations beyond their route schemas. */

import { AT, EVENT, TICKET_CODE, TICKET_UID, TIMEZONE, TRANSFER_UID } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

const CLAIM_TOKEN = 'q3L1v0Zk8m2QxT7bR5yN9pWc4HdJfGsA6eUoKiYtV1w'

const holderTicket = {
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

const linkView = {
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
  operations: {
    'GET /holder/links/{token}': {
      operationId: 'getClaimLink',
      returns: "The link's event and tickets",
      response: { ...linkView, claimed: false, tickets: [{ ...holderTicket, status: 'TRANSFERRED' }] },
    },
    'POST /holder/links/{token}/claim': {
      operationId: 'claimLink',
      returns: "The link's tickets, now the consumer's",
      response: linkView,
      errors: {
        409: [
          {
            code: 'already_claimed',
            when: 'another consumer claimed the link',
            detail: 'This link was already claimed by another account',
          },
        ],
      },
    },
    'GET /consumers/me/tickets': {
      operationId: 'listMyTickets',
      returns: "The consumer's tickets",
      response: { tickets: [holderTicket] },
    },
    'GET /consumers/me/wallets': {
      operationId: 'listMyWallets',
      returns: "The consumer's balances",
      response: {
        wallets: [
          {
            event_uid: EVENT,
            event_name: 'Summer Festival 2026',
            balance: 20,
            promo_balance: 5,
            updated_at: AT,
          },
        ],
      },
    },
  },
}
