/** What the OpenAPI document says about the check-in list operations beyond their route schemas. */

import { AT, TICKET_UID, TRANSFER_UID } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

const LIST = {
  id: 12,
  event_id: 1,
  name: 'Camping',
  is_default: false,
  ticket_type_ids: [TICKET_UID],
  allow_multiple_entries: false,
  allow_entry_after_exit: true,
  windows: [{ from: '2027-07-16T10:00:00', until: '2027-07-19T12:00:00' }],
  exit_all_at: null,
  archived_at: null,
  created_at: AT,
  updated_at: AT,
}

const DEFAULT_LIST = {
  ...LIST,
  id: 3,
  name: 'Default',
  is_default: true,
  ticket_type_ids: null,
  allow_entry_after_exit: false,
  windows: null,
}

export const CHECKIN_OPENAPI: FeatureOpenApi = {
  tags: {
    checkin:
      "An event's check-in lists (areas and days: ticket types, re-entry, windows, exit_all_at), their live counts and the scan log (docs/gate.md)",
  },
  operations: {
    'POST /events/{event_id}/checkin-lists': {
      operationId: 'createCheckinList',
      returns: 'The list, created',
      request: {
        name: 'Camping',
        ticket_type_ids: [TICKET_UID],
        allow_entry_after_exit: true,
        windows: [{ from: '2027-07-16T10:00:00', until: '2027-07-19T12:00:00' }],
      },
      response: LIST,
    },
    'GET /events/{event_id}/checkin-lists': {
      operationId: 'listCheckinLists',
      returns: 'The lists, the default list first',
      response: [DEFAULT_LIST, LIST],
    },
    'PATCH /events/{event_id}/checkin-lists/{list_id}': {
      operationId: 'changeCheckinList',
      returns: 'The list as changed',
      request: { exit_all_at: '04:00' },
      response: { ...LIST, exit_all_at: '04:00' },
    },
    'DELETE /events/{event_id}/checkin-lists/{list_id}': {
      operationId: 'archiveCheckinList',
      returns: 'The list, archived',
      response: { ...LIST, archived_at: AT },
    },
    'GET /events/{event_id}/checkin-lists/{list_id}/status': {
      operationId: 'checkinListStatus',
      returns: 'The counts now',
      response: {
        checkin_list_id: 12,
        name: 'Camping',
        inside: 1841,
        entries: 2406,
        exits: 565,
        counted_out: 0,
        refused: { already_used: 37, product: 12, invalid_time: 3 },
        entries_per_hour: [
          { hour: '2027-07-16T10', entries: 611 },
          { hour: '2027-07-16T11', entries: 1795 },
        ],
        at: AT,
      },
    },
    'GET /events/{event_id}/checkins': {
      operationId: 'listCheckins',
      returns: 'A page of scans, newest first',
      response: {
        checkins: [
          {
            id: 90412,
            checkin_list_id: 12,
            transfer_uid: TRANSFER_UID,
            direction: 'entry',
            result: 'refused',
            reason: 'already_used',
            first_use: false,
            scanned_at: AT,
            local_at: '2026-07-01T11:30:00.000',
            gate: 'Camping North',
            device_id: '4',
            actor: 'operator:7',
            offline: true,
          },
        ],
        next_cursor: '90412',
      },
    },
  },
}
