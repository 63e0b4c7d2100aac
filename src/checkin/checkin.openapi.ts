/**
 * The checkin feature's OpenAPI texts that are no one route's: its tags' descriptions and the example values
 * and error cases its routes share. Each route's own texts (operationId, what it answers, examples, `error`
 * codes) are in its schema's `doc`.
 */

import { AT, TICKET_UID } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const LIST = {
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

export const DEFAULT_LIST = {
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
}
