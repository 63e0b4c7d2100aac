import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { AppError, ForbiddenError, NotFoundError } from '../platform/errors.js'
import { WebhookDeliveries } from '../webhooks/webhooks.service.js'
import { DELIVERY_STATUSES, type DeliveriesPageData, deliveriesPage } from './deliveries.templates.js'
import { CsrfForm, pageKit, sendPage, sessionOf } from './kit/pages.js'
import { csrfMatches, type SessionDeps } from './session.service.js'
import { findEvent } from './stats.service.js'
import { canSeeEvent, type Viewer, visiblePartners } from './viewers.js'

export interface DeliveriesPageDeps extends SessionDeps {
  /** Runs due jobs now, so a resend goes out at once. */
  runDueJobs: () => void
}

const PAGE_SIZE = 50

const DeliveriesQuery = Type.Object(
  {
    status: Type.Optional(Type.Union(DELIVERY_STATUSES.map((s) => Type.Literal(s)))),
    before: Type.Optional(Type.Integer({ minimum: 1 })),
    resent: Type.Optional(Type.Integer({ minimum: 1 })),
    partner: Type.Optional(
      Type.Integer({ minimum: 1, description: 'The partner whose deliveries are shown' }),
    ),
  },
  { additionalProperties: false },
)

const ResendParams = Type.Object({
  event_id: Type.Integer({ minimum: 1 }),
  delivery_id: Type.Integer({ minimum: 1 }),
})

/**
 * An event's webhook deliveries for the people who answer for its receivers: its administrators and
 * network managers (canSeeEvent) see every partner's; a dashboard user of the event only those of the
 * partner it is bound to (visiblePartners), none while it is bound to none. Resend is the partner API's
 * retry (same webhook-id), behind the session's CSRF token, and audited.
 */
export const deliveriesPageRoutes: FastifyPluginAsyncTypebox<DeliveriesPageDeps> = async (app, deps) => {
  const kit = pageKit(deps)
  const webhooks = new WebhookDeliveries(deps)

  /**
   * One partner's receiver and deliveries (the page is per partner: docs/specification.md), among
   * the partners the viewer may see (visiblePartners): a partner of another event, or one the viewer
   * may not see, is not found; without one named, the first visible partner is shown. A dashboard user
   * who answers for no partner of the event gets the page without any (`unbound`).
   */
  async function pageData(
    viewer: Viewer,
    eventId: number,
    query: { status?: (typeof DELIVERY_STATUSES)[number]; before?: number; partner?: number },
    notice: DeliveriesPageData['notice'],
  ): Promise<DeliveriesPageData> {
    const event = await findEvent(deps, eventId)
    const partners = visiblePartners(viewer, await webhooks.partnersOf(eventId))
    if (viewer.partners !== 'all' && partners.length === 0) {
      const unbound = { partner: viewer.partners?.name ?? null }
      const empty = { partners, partner: undefined, receiver: null, deliveries: [], older: undefined }
      return { event, ...empty, status: undefined, notice: undefined, unbound }
    }
    const partner = query.partner !== undefined ? partners.find((p) => p.id === query.partner) : partners[0]
    if (query.partner !== undefined && !partner) throw new NotFoundError('No such partner for this event')
    const hook = partner ? await webhooks.receiverOf(partner.id) : undefined
    const rows = partner
      ? await webhooks.deliveries(partner.id, {
          limit: PAGE_SIZE + 1,
          ...(query.before !== undefined ? { before: query.before } : {}),
          ...(query.status !== undefined ? { status: query.status } : {}),
        })
      : []
    const deliveries = rows.slice(0, PAGE_SIZE)
    return {
      event,
      partners,
      partner,
      receiver: hook
        ? { url: hook.url, enabled: hook.disabled_at === null, disabled_reason: hook.disabled_reason }
        : null,
      deliveries,
      status: query.status,
      older: rows.length > PAGE_SIZE ? deliveries.at(-1)!.id : undefined,
      notice,
    }
  }

  app.get(
    '/dashboard/events/:event_id/webhooks',
    kit.eventPage(
      {
        summary:
          "An event's recent webhook deliveries with every attempt, filterable by status, each with a Resend button",
        doc: {
          operationId: 'getDashboardWebhookDeliveriesPage',
          returns: "The page of the event's webhook deliveries",
        },
      },
      { querystring: DeliveriesQuery },
    ),
    async (request, reply) => {
      const { event_id } = request.params
      const session = sessionOf(request, (viewer) => canSeeEvent(viewer, event_id))
      const { resent, ...query } = request.query
      const notice =
        resent !== undefined
          ? { kind: 'good' as const, text: `Delivery #${resent} is being sent again.` }
          : undefined
      const data = await pageData(session.viewer, event_id, query, notice)
      return sendPage(reply, deliveriesPage(session, data))
    },
  )

  app.post(
    '/dashboard/events/:event_id/webhooks/deliveries/:delivery_id/resend',
    {
      ...kit.form(
        {
          summary:
            'Send a webhook delivery again now, with the same webhook-id (needs the session and its CSRF token)',
          statuses: [403, 404, 409, 422],
          doc: {
            operationId: 'dashboardResendWebhookDelivery',
            returns: 'Scheduled; back to the deliveries page',
          },
        },
        { params: ResendParams, body: CsrfForm },
      ),
      // A refused form is audited before it is answered 422, so validation is the handler's.
      attachValidation: true,
    },
    async (request, reply) => {
      const session = sessionOf(request)
      const { event_id, delivery_id } = request.params
      const actor = `${session.viewer.kind}:${session.viewer.id}`
      // Every refusal is recorded, as docs/security.md says: a form without its fields (422), a wrong
      // CSRF token or another event (403), a delivery that is not this event's (404).
      const denied = (reason: string) =>
        deps.audit.record({
          kind: 'webhook_resend',
          actor,
          ip: request.ip,
          outcome: 'denied',
          detail: { event_id, delivery_id, reason },
        })
      if (request.validationError) {
        await denied('invalid_form')
        throw request.validationError
      }
      if (!csrfMatches(session, request.body?.csrf_token) || !canSeeEvent(session.viewer, event_id)) {
        await denied('csrf_or_access')
        throw new ForbiddenError('CSRF token missing or wrong, or no access to the event')
      }
      // The delivery's partner, provided the delivery is one of this event's and its partner is one the
      // viewer may see: another partner's delivery is refused as an unknown one.
      const partnerId = await webhooks.partnerOfDelivery(event_id, delivery_id)
      const visible = visiblePartners(session.viewer, await webhooks.partnersOf(event_id))
      if (partnerId === undefined || !visible.some((p) => p.id === partnerId)) {
        await denied('unknown_delivery')
        throw new NotFoundError('No such delivery')
      }
      try {
        await webhooks.resend(partnerId, delivery_id)
      } catch (err) {
        if (!(err instanceof AppError && err.code === 'webhook_disabled')) throw err
        const text =
          'The receiver is disabled or removed: the partner must register it again before a resend.'
        const data = await pageData(session.viewer, event_id, { partner: partnerId }, { kind: 'bad', text })
        return sendPage(reply, deliveriesPage(session, data), 409)
      }
      await deps.audit.record({
        kind: 'webhook_resend',
        actor,
        ip: request.ip,
        outcome: 'success',
        detail: { event_id, delivery_id },
      })
      deps.runDueJobs()
      return reply.redirect(
        `/dashboard/events/${event_id}/webhooks?partner=${partnerId}&resent=${delivery_id}`,
        303,
      )
    },
  )
}
