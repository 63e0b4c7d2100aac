/**
 * The tickets feature's OpenAPI texts that are no one route's: its tags' descriptions and path-parameter
 * examples. Each route's own texts (operationId, what it answers, examples, `error` codes) are in its
 * schema's `doc`.
 */

import { TRANSFER_UID } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'

export const TICKETS_OPENAPI: FeatureOpenApi = {
  tags: {
    tickets: 'Ticket use (scans)',
  },
  params: { transfer_uid: TRANSFER_UID },
}
