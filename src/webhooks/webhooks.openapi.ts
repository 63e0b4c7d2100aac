/**
 * What the OpenAPI document says about the webhook operations beyond their route schemas
 * item 5: the text lives with its feature, not in platform/). src/openapi.ts hands it to the document builder.
 */

import { AT } from '../platform/openapi-examples.js'
import type { FeatureOpenApi } from '../platform/openapi-operations.js'
import { NOTIFICATION_EXAMPLE, NOTIFICATION_WEBHOOKS } from './notification.js'

const webhookView = {
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
  operations: {
    'PUT /companies/webhook': {
      operationId: 'registerWebhook',
      returns: 'The receiver, with its signing secret (shown only here)',
      request: { url: 'https://partner.example.com/wristband/webhooks' },
      response: { ...webhookView, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' },
    },
    'GET /companies/webhook': {
      operationId: 'getWebhook',
      returns: 'The registered receiver',
      response: webhookView,
    },
    'DELETE /companies/webhook': {
      operationId: 'deleteWebhook',
      returns: 'The receiver is removed',
      response: { message: 'Webhook removed' },
    },
    'GET /companies/webhook/deliveries': {
      operationId: 'listWebhookDeliveries',
      returns: 'A page of deliveries, newest first',
      response: {
        deliveries: [
          {
            id: 7,
            webhook_id: 'msg_2kVh0cL9sQf1T8xYb3NwR6',
            status: 'pending',
            payload: NOTIFICATION_EXAMPLE,
            attempts: 1,
            created_at: '2026-07-18T20:14:03.000Z',
            delivered_at: null,
            next_attempt_at: '2026-07-18T20:15:03.000Z',
            attempt_log: [
              {
                attempted_at: '2026-07-18T20:14:03.000Z',
                url: 'https://partner.example.com/wristband/webhooks',
                status_code: 503,
                duration_ms: 84,
                error: null,
                response_body: 'upstream unavailable',
              },
            ],
          },
        ],
      },
    },
    'POST /companies/webhook/deliveries/{id}/retry': {
      operationId: 'retryWebhookDelivery',
      returns: 'The delivery is scheduled now, with the same webhook-id',
      response: { message: 'Redelivery scheduled' },
      errors: {
        409: [
          {
            code: 'webhook_disabled',
            when: 'no enabled receiver; register it again with PUT /companies/webhook',
            detail: 'No enabled webhook: register the receiver again with PUT /companies/webhook',
          },
        ],
      },
    },
  },
}
