/**
 * The webhooks feature's OpenAPI texts that are no one route's: its tags' descriptions, the `webhooks` it
 * sends and the example values and error cases its routes share. Each route's own texts (operationId, what
 * it answers, examples, `error` codes) are in its schema's `doc`.
 */

import { AT } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'
import { NOTIFICATION_WEBHOOKS } from './notification.js'

export const webhookView = {
  url: 'https://partner.example.com/wristband/webhooks',
  enabled: true,
  disabled_reason: null,
  created_at: AT,
  updated_at: AT,
}

export const WEBHOOKS_OPENAPI: FeatureOpenApi = {
  tags: { webhooks: 'Ticket partners: the receiver of use notifications and its deliveries' },
  // The document's `webhooks`: the use notification the service sends to a partner's receiver.
  webhooks: NOTIFICATION_WEBHOOKS,
}
