import { Type } from 'typebox'

/**
 * The body of a use notification, as sent to the partner's receiver and shown as a delivery's
 * `payload`: one schema for both, so generated clients type the payload.
 */
export const UseNotification = Type.Object(
  {
    event_uid: Type.String(),
    transfer_uid: Type.String({ pattern: '^[0-9a-f]{32}$' }),
    user_email: Type.String({ description: "The holder's e-mail address" }),
    company_ticket_id: Type.String({ description: "The partner's identifier of the ticket" }),
    status: Type.Literal('USED'),
    used_timestamp: Type.String({
      description: "When the ticket was used, in the event's local time (YYYY-MM-DDThh:mm:ss.SSS, no offset)",
    }),
    used_at: Type.Optional(
      Type.String({
        format: 'date-time',
        description:
          'When the ticket was used, UTC (ISO 8601 with Z); absent from notifications queued before it was added',
      }),
    ),
    event_timezone: Type.Optional(
      Type.String({
        description: "The event's IANA time zone, which used_timestamp is local to (e.g. Europe/Berlin)",
      }),
    ),
  },
  {
    additionalProperties: true,
    description: 'A ticket use. Fields may be added; receivers should ignore the ones they do not know.',
  },
)

export const NOTIFICATION_EXAMPLE = {
  event_uid: 'summer-festival-2026',
  transfer_uid: '9b1d3f7a2c4e6b8d0f1a3c5e7b9d2f4a',
  user_email: 'holder@example.com',
  company_ticket_id: 'order-1042-1',
  status: 'USED',
  used_timestamp: '2026-07-18T20:14:03.000',
  used_at: '2026-07-18T18:14:03.000Z',
  event_timezone: 'Europe/Berlin',
}

const header = (name: string, description: string, schema: Record<string, unknown>) => ({
  in: 'header',
  name,
  required: true,
  description,
  schema,
})

/**
 * The OpenAPI 3.1 `webhooks` of the service: what a partner's receiver gets (the document's top-level
 * `webhooks`, given to the platform's OpenAPI builder through webhooks.openapi.ts).
 */
export const NOTIFICATION_WEBHOOKS = {
  ticketUsed: {
    post: {
      operationId: 'ticketUsed',
      summary: 'A ticket the partner transferred was used',
      tags: ['webhooks'],
      // No credential: the receiver authenticates the request by its signature (below).
      security: [],
      description:
        'Sent to the receiver registered with PUT /companies/webhook by the partner that transferred the ticket, ' +
        'signed per Standard Webhooks (https://www.standardwebhooks.com). **Verifying**: take the secret ' +
        'answered at registration (`whsec_<base64>`), base64-decode the part after `whsec_` to get the key, compute ' +
        'HMAC-SHA256 over `<webhook-id>.<webhook-timestamp>.<raw body>` and compare its base64, in constant time, ' +
        'with each `v1,<base64>` entry of `webhook-signature` (space-separated). Refuse a `webhook-timestamp` that ' +
        'is not digits only or is more than 5 minutes from now, and a message id and timestamp accepted before ' +
        '(a replay). Answer 2xx to acknowledge; 410 disables the webhook; anything else (or no answer in 10 s) is ' +
        'retried on the WEBHOOK_RETRY_SCHEDULE, honouring Retry-After. Every attempt and resend of one ' +
        'notification carries the same `webhook-id`: deduplicate by it. `@wristband/partner-client` exports ' +
        '`WebhookReceiver`, which does all of this.',
      parameters: [
        header('webhook-id', "The notification's id (`msg_…`): the same on every attempt and resend", {
          type: 'string',
          pattern: '^msg_[A-Za-z0-9_-]+$',
        }),
        header('webhook-timestamp', 'When this attempt was signed: Unix time in whole seconds, digits only', {
          type: 'string',
          pattern: '^\\d{1,12}$',
        }),
        header(
          'webhook-signature',
          '`v1,` + base64 of HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>"); several space-separated after a secret rotation',
          { type: 'string', pattern: '^v1,[A-Za-z0-9+/]+=*( v1,[A-Za-z0-9+/]+=*)*$' },
        ),
      ],
      requestBody: {
        required: true,
        content: { 'application/json': { schema: UseNotification, example: NOTIFICATION_EXAMPLE } },
      },
      responses: {
        '200': { description: 'Received (any 2xx acknowledges the notification)' },
        '410': {
          description: 'Gone: the webhook is disabled and nothing more is sent until it is registered again',
        },
      },
    },
  },
}
