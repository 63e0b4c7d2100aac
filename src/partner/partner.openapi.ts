/**
 * What the OpenAPI document says about the partner operations beyond their route schemas
 * (the text lives with its feature, not in platform/): operationIds, success descriptions,
 * examples and `error` codes. src/openapi.ts hands it to the platform's document builder.
 */

import {
  AT,
  DEVICE_KEY_REQUIRED,
  EVENT,
  TICKET_CODE,
  TICKET_UID,
  TIMEZONE,
  TRANSFER_UID,
  USED_LOCAL,
  USED_UTC,
} from '../platform/openapi-examples.js'
import type { ErrorCase, FeatureOpenApi } from '../platform/openapi-operations.js'

const idempotencyInUse: ErrorCase = {
  code: 'idempotency_key_in_use',
  when: 'a request with the same Idempotency-Key is still being processed; retry shortly',
  detail: 'A request with this Idempotency-Key is still being processed',
}

const ticketType = {
  ticket_uid: TICKET_UID,
  event_uid: EVENT,
  event_timezone: TIMEZONE,
  name: 'Weekend pass',
  price: 149.5,
  ticket_date: '2026-07-18T20:00:00.000',
  created_at: AT,
}

/** A transfer as the partner API answers it. */
const transferView = {
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
  operations: {
    'POST /companies/ticket': {
      operationId: 'createTicketType',
      returns: 'The ticket type created (or, for a repeated Idempotency-Key, the first answer again)',
      request: {
        event_uid: EVENT,
        name: 'Weekend pass',
        price: 149.5,
        ticket_date: '2026-07-18T20:00:00.000',
      },
      response: ticketType,
      errors: { 409: [idempotencyInUse] },
    },
    'GET /companies/tickets': {
      operationId: 'listTicketTypes',
      returns: "The ticket types of the key's event",
      response: { tickets: [ticketType] },
    },
    'POST /companies/transfer': {
      operationId: 'createTransfer',
      returns: 'The ticket is sent (or, for a repeated Idempotency-Key, the first answer again)',
      request: {
        event_uid: EVENT,
        email: 'holder@example.com',
        ticket_uid: TICKET_UID,
        company_ticket_id: 'order-1042-1',
        balance: 20,
        promo_balance: 5,
        additional_info: { access_gate: 'North' },
      },
      response: transferView,
      errors: {
        409: [
          {
            code: 'duplicate_company_ticket_id',
            when: 'the company_ticket_id was already used by this partner',
            detail: 'company_ticket_id has already been used by this partner',
          },
          idempotencyInUse,
        ],
      },
    },
    'POST /companies/transfers': {
      operationId: 'createTransfers',
      returns:
        'One result per transfer, in the order sent: 201 with the transfer, or the status and error body POST /companies/transfer would have answered',
      request: {
        event_uid: EVENT,
        transfers: [
          { email: 'holder@example.com', ticket_uid: TICKET_UID, company_ticket_id: 'order-1042-1' },
          {
            email: 'holder@example.com',
            ticket_uid: TICKET_UID,
            company_ticket_id: 'order-1042-2',
            balance: 20,
          },
        ],
      },
      response: {
        results: [
          {
            company_ticket_id: 'order-1042-1',
            status: 201,
            transfer: transferView,
          },
          {
            company_ticket_id: 'order-1042-2',
            status: 409,
            error: {
              detail: 'company_ticket_id has already been used by this partner',
              error: 'duplicate_company_ticket_id',
            },
          },
        ],
      },
      errors: { 409: [idempotencyInUse] },
    },
    'GET /companies/transfer/{company_ticket_id}': {
      operationId: 'getTransfer',
      returns: 'The transfer and its state',
      response: {
        transfer_uid: TRANSFER_UID,
        event_uid: EVENT,
        ticket_uid: TICKET_UID,
        company_ticket_id: 'order-1042-1',
        email: 'holder@example.com',
        balance: 20,
        promo_balance: 5,
        additional_info: { access_gate: 'North' },
        status: 'USED',
        claimed: true,
        emailed: true,
        used_timestamp: USED_LOCAL,
        used_at: USED_UTC,
        event_timezone: TIMEZONE,
        created_at: AT,
        ticket_code: TICKET_CODE,
      },
    },
    'POST /companies/transfer/{company_ticket_id}/reissue': {
      operationId: 'reissueTicketCode',
      returns: 'The transfer has a new ticket code; the previous one is revoked',
      response: {
        transfer_uid: TRANSFER_UID,
        company_ticket_id: 'order-1042-1',
        code_version: 2,
        ticket_code: TICKET_CODE,
      },
      errors: {
        409: [
          {
            code: 'already_used',
            when: 'the ticket was used: a used ticket keeps its code',
            detail: 'A used ticket keeps its code',
            extra: { used_timestamp: USED_LOCAL, used_at: USED_UTC },
          },
          {
            code: 'concurrent_change',
            when: 'the ticket was used or re-issued while this request ran',
            detail: 'The ticket was used or re-issued meanwhile',
          },
        ],
      },
    },

    // offline
    'GET /.well-known/jwks.json': {
      operationId: 'getEdgeKeySet',
      returns: 'The JWK Set of the edge keys, current key first',
      response: {
        keys: [
          {
            kty: 'OKP',
            crv: 'Ed25519',
            x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo',
            kid: 'Vq3n8dXk2Lw',
            alg: 'EdDSA',
            use: 'sig',
          },
        ],
      },
    },
    'GET /events/{event_id}/scan-sync': {
      operationId: 'syncScannerFeed',
      errors: DEVICE_KEY_REQUIRED,
      returns: "A page of the event's ticket changes since the cursor",
      response: {
        event_id: 1,
        key_ids: ['Vq3n8dXk2Lw'],
        tickets: [
          {
            transfer_uid: TRANSFER_UID,
            ticket_uid: TICKET_UID,
            change: 'used',
            version: 1,
            digest: 'kR3v0Yq9Lw2mXb7Tn5Hc1A',
            used_timestamp: USED_LOCAL,
            used_at: USED_UTC,
            used_gate: 'North',
          },
          {
            transfer_uid: '5f1c0e7a9b2d4c6e8f0a1b3c5d7e9f01',
            ticket_uid: TICKET_UID,
            change: 'revoked',
            version: 2,
            digest: 'Zp8sQ1dN4fG6hJ0kL2mB9w',
            used_timestamp: null,
            used_at: null,
            used_gate: null,
          },
        ],
        cursor: '1042',
        has_more: false,
      },
    },
  },
}
