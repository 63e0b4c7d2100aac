/** What the OpenAPI document says about the tickets operations beyond their route schemas. */

import { DEVICE_KEY_REQUIRED, TRANSFER_UID, USED_LOCAL, USED_UTC } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const TICKETS_OPENAPI: FeatureOpenApi = {
  tags: {
    tickets: 'Ticket use (scans)',
  },
  params: { transfer_uid: TRANSFER_UID },
  operations: {
    'POST /tickets/{transfer_uid}/use': {
      operationId: 'useTicket',
      returns: 'The ticket is used (the first use)',
      bodyOptional: true,
      request: { access_gate: 'North', checkin_list_id: 12, direction: 'entry' },
      response: {
        status: 'USED',
        used_timestamp: USED_LOCAL,
        used_at: USED_UTC,
        checkin_list_id: 12,
        direction: 'entry',
        first_use: true,
      },
      errors: {
        409: [
          {
            code: 'already_used',
            when: 'no entry allowed now: the ticket entered already (on the default list: it was used); `used_timestamp` tells when it was first used',
            detail: 'Ticket already used',
            extra: {
              reason: 'already_used',
              used_timestamp: USED_LOCAL,
              used_at: USED_UTC,
              checkin_list_id: 12,
              direction: 'entry',
            },
          },
          {
            code: 'product',
            when: "the ticket's type is not on the list",
            detail: 'The ticket type is not on this check-in list',
            extra: { reason: 'product', checkin_list_id: 12, direction: 'entry' },
          },
          {
            code: 'invalid_time',
            when: "outside the list's windows",
            detail: 'Outside the check-in list’s times',
            extra: { reason: 'invalid_time', checkin_list_id: 12, direction: 'entry' },
          },
          {
            code: 'wrong_event',
            when: 'the ticket is of another event than the list',
            detail: 'The ticket is of another event',
            extra: { reason: 'wrong_event', checkin_list_id: 12, direction: 'entry' },
          },
        ],
      },
    },
    'POST /tickets/use-batch': {
      operationId: 'useTicketBatch',
      errors: DEVICE_KEY_REQUIRED,
      returns: 'One result per scan, in order',
      request: {
        scans: [
          {
            transfer_uid: TRANSFER_UID,
            used_at: '2026-07-18T20:15:30.123Z',
            access_gate: 'North',
            version: 1,
            checkin_list_id: 12,
            direction: 'entry',
            nonce: 'q1Xv3b8Jc0LrT5nW2yZk7A',
          },
        ],
      },
      response: {
        results: [
          {
            transfer_uid: TRANSFER_UID,
            status: 'USED',
            used_timestamp: USED_LOCAL,
            used_at: USED_UTC,
            checkin_list_id: 12,
            direction: 'entry',
            first_use: true,
          },
          {
            transfer_uid: '7c2e4a6b8d0f1e3a5c7e9b1d3f5a7c9e',
            status: 'REFUSED',
            reason: 'product',
            checkin_list_id: 12,
            direction: 'entry',
          },
          {
            transfer_uid: '5f1c0e7a9b2d4c6e8f0a1b3c5d7e9f01',
            status: 'ALREADY_USED',
            used_timestamp: '2026-07-18T20:02:47.000',
            used_at: '2026-07-18T18:02:47.000Z',
          },
          {
            transfer_uid: '2a4c6e8f0b1d3f5a7c9e1b3d5f7a9c0e',
            status: 'USED',
            used_timestamp: '2026-07-18T20:16:05.000',
            used_at: '2026-07-18T18:16:05.000Z',
            revoked_code: true,
          },
          { transfer_uid: '0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a', status: 'NOT_FOUND' },
        ],
      },
    },
  },
}
