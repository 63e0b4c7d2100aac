import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { type Static, Type } from 'typebox'
import type { AuditLog } from '../audit/audit.store.js'
import type { Metrics } from '../metrics/metrics.js'
import { type PartnerAuthDeps, partnerAuth, partnerOf } from '../partner/partner-auth.js'
import type { Config } from '../platform/config.js'
import { NotFoundError } from '../platform/errors.js'
import type { JobRunner } from '../platform/jobs/jobs.js'
import type { SecretKeys } from '../platform/keys.js'
import { errorResponses, Message } from '../platform/schemas.js'
import { NOTIFICATION_EXAMPLE, UseNotification } from './notification.js'
import { type WebhookDeliveryDeps, webhookDeliveryJob } from './webhook-delivery.js'
import { webhookView } from './webhooks.openapi.js'
import { WebhookService, type WebhookServiceDeps } from './webhooks.service.js'
import { countPendingDeliveries, resealStoredSecrets, WEBHOOK_JOB } from './webhooks.store.js'

export interface WebhookRoutesDeps extends Omit<WebhookServiceDeps, 'sealer'> {
  /** Run due jobs now instead of at the next poll (a manual retry is meant to go out at once). */
  runDueJobs: () => void
  /** Refused retries are recorded. */
  audit: AuditLog
  /** The job queue, which delivers the notifications (the feature registers its job here). */
  jobs: JobRunner
  /** This instance's one cache of API keys (the partner hooks) */
  apiKeys: PartnerAuthDeps['apiKeys']
  /** Receivers' signing secrets are sealed with the `webhook-secret` sealer. */
  keys: SecretKeys
  config: Pick<Config, 'PARTNER_RATE_LIMIT' | 'WEBHOOK_RETRY_SCHEDULE'>
  /** Counts each attempt's outcome, and is told the number of deliveries waiting at each scrape. */
  metrics: Pick<Metrics, 'webhookDeliveries' | 'outboxDepth' | 'onCollect'>
}

const security = [{ APIKeyHeader: [] }]
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

const WebhookRequest = Type.Object(
  {
    url: Type.String({
      format: 'uri',
      maxLength: 2048,
      pattern: '^https?://',
      description: 'http(s) address of the receiver; loopback and private addresses are refused',
    }),
  },
  { additionalProperties: false },
)

const WebhookView = Type.Object({
  url: Type.String(),
  enabled: Type.Boolean(),
  disabled_reason: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
})

const WebhookRegistered = Type.Object({
  ...WebhookView.properties,
  secret: Type.String({ description: 'Signing secret (Standard Webhooks), shown only in this answer' }),
})

const Attempt = Type.Object({
  attempted_at: Type.String({ format: 'date-time' }),
  url: Type.String(),
  status_code: Type.Union([Type.Integer(), Type.Null()]),
  duration_ms: Type.Integer(),
  error: Type.Union([Type.String(), Type.Null()]),
  response_body: Type.Union([Type.String(), Type.Null()], { description: 'First kilobyte of the answer' }),
})

const Delivery = Type.Object({
  id: Type.Integer(),
  webhook_id: Type.String({ description: 'The webhook-id header, the same on every attempt' }),
  status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
  payload: UseNotification,
  attempts: Type.Integer(),
  created_at: Type.String({ format: 'date-time' }),
  delivered_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  next_attempt_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  attempt_log: Type.Array(Attempt),
})

const DeliveriesQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    before: Type.Optional(Type.Integer({ minimum: 1, description: 'Only deliveries with a smaller id' })),
    status: Type.Optional(
      Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
    ),
  },
  { additionalProperties: false },
)

function view(h: {
  url: string
  disabled_at: number | null
  disabled_reason: string | null
  created_at: number
  updated_at: number
}) {
  return {
    url: h.url,
    enabled: h.disabled_at === null,
    disabled_reason: h.disabled_reason,
    created_at: iso(h.created_at)!,
    updated_at: iso(h.updated_at)!,
  }
}

export const webhookRoutes: FastifyPluginAsyncTypebox<WebhookRoutesDeps> = async (app, given) => {
  const { config, metrics } = given
  const deps: WebhookServiceDeps & WebhookDeliveryDeps & PartnerAuthDeps & WebhookRoutesDeps = {
    ...given,
    sealer: given.keys.sealer('webhook-secret'),
    partnerRateLimit: config.PARTNER_RATE_LIMIT,
    retrySchedule: config.WEBHOOK_RETRY_SCHEDULE,
    onAttempt: (outcome) => metrics.webhookDeliveries.inc({ outcome }),
  }
  // Signing secrets are sealed at rest; plain rows (from before sealing) and rows sealed under a previous
  // signing secret are sealed under the current one now.
  await resealStoredSecrets(deps.db, deps.sealer)
  deps.jobs.register(WEBHOOK_JOB, webhookDeliveryJob(deps))
  metrics.onCollect(async () => metrics.outboxDepth.set(await countPendingDeliveries(deps.db)))
  const webhooks = new WebhookService(deps)
  const write = partnerAuth(deps, 'write')
  const read = partnerAuth(deps, 'read')

  app.put(
    '/companies/webhook',
    {
      ...write,
      schema: {
        tags: ['webhooks'],
        summary: 'Register the receiver of use notifications; answers the signing secret once',
        description:
          'Replacing the receiver issues a new secret and re-enables a webhook disabled by a 410 answer.',
        security,
        body: WebhookRequest,
        response: { 200: WebhookRegistered, ...errorResponses(401, 403) },
        doc: {
          operationId: 'registerWebhook',
          returns: 'The receiver, with its signing secret (shown only here)',
          request: { url: 'https://partner.example.com/wristband/webhooks' },
          response: { ...webhookView, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' },
        },
      },
    },
    async (request) => {
      const { hook, secret } = await webhooks.register(partnerOf(request), request.body.url)
      return { ...view(hook), secret }
    },
  )

  app.get(
    '/companies/webhook',
    {
      ...read,
      schema: {
        tags: ['webhooks'],
        summary: 'The registered receiver (without its secret)',
        security,
        response: { 200: WebhookView, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'getWebhook',
          returns: 'The registered receiver',
          response: webhookView,
        },
      },
    },
    async (request) => {
      const hook = await webhooks.receiverOf(partnerOf(request).partnerId)
      if (!hook) throw new NotFoundError('No webhook is registered')
      return view(hook)
    },
  )

  app.delete(
    '/companies/webhook',
    {
      ...write,
      schema: {
        tags: ['webhooks'],
        summary: 'Remove the receiver; pending deliveries are given up',
        security,
        response: { 200: Message, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'deleteWebhook',
          returns: 'The receiver is removed',
          response: { message: 'Webhook removed' },
        },
      },
    },
    async (request) => {
      if (!(await webhooks.remove(partnerOf(request).partnerId)))
        throw new NotFoundError('No webhook is registered')
      return { message: 'Webhook removed' }
    },
  )

  app.get(
    '/companies/webhook/deliveries',
    {
      ...read,
      schema: {
        tags: ['webhooks'],
        summary: 'Notifications sent to the receiver, newest first, with every attempt',
        security,
        querystring: DeliveriesQuery,
        response: { 200: Type.Object({ deliveries: Type.Array(Delivery) }), ...errorResponses(401, 403) },
        doc: {
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
      },
    },
    async (request) => {
      const { limit = 50, before, status } = request.query
      const rows = await webhooks.deliveries(partnerOf(request).partnerId, {
        limit,
        ...(before !== undefined ? { before } : {}),
        ...(status !== undefined ? { status } : {}),
      })
      return {
        deliveries: rows.map((d) => ({
          id: d.id,
          webhook_id: d.uid,
          status: d.status as 'pending' | 'delivered' | 'failed',
          payload: JSON.parse(d.payload) as Static<typeof UseNotification>,
          attempts: d.attempts,
          created_at: iso(d.created_at)!,
          delivered_at: iso(d.delivered_at),
          next_attempt_at: iso(d.next_attempt_at),
          attempt_log: d.attempts_log.map((a) => ({
            attempted_at: iso(a.attempted_at)!,
            url: a.url,
            status_code: a.status_code,
            duration_ms: a.duration_ms,
            error: a.error,
            response_body: a.response_body,
          })),
        })),
      }
    },
  )

  app.post(
    '/companies/webhook/deliveries/:id/retry',
    {
      ...write,
      schema: {
        tags: ['webhooks'],
        summary: 'Send a notification again now (same webhook-id)',
        security,
        params: Type.Object({ id: Type.Integer({ minimum: 1 }) }, { additionalProperties: false }),
        response: { 202: Message, ...errorResponses(401, 403, 404, 409) },
        doc: {
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
    },
    async (request, reply) => {
      const partner = partnerOf(request)
      try {
        await webhooks.resend(partner.partnerId, request.params.id)
      } catch (err) {
        // Another partner's delivery, or none: refused as unknown, and recorded as a refusal.
        if (err instanceof NotFoundError)
          await deps.audit.record({
            kind: 'webhook_resend',
            actor: `api_key:${partner.keyId}`,
            ip: request.ip,
            outcome: 'denied',
            detail: { event_id: partner.eventId, delivery_id: request.params.id, reason: 'unknown_delivery' },
          })
        throw err
      }
      deps.runDueJobs()
      reply.code(202)
      return { message: 'Redelivery scheduled' }
    },
  )
}
