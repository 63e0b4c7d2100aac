import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { latestFlaggedCodeUses } from '../tickets/tickets.service.js'
import { WebhookDeliveries } from '../webhooks/webhooks.service.js'
import { pageKit, sendPage, sessionOf } from './kit/pages.js'
import type { SessionDeps } from './session.service.js'
import { eventsWithFigures, findEvent } from './stats.service.js'
import { eventListPage, eventPage } from './templates.js'
import { canSeeEvent, visiblePartners } from './viewers.js'

/** The events of the signed-in account, and an event's page (its figures come from stats.routes.ts). */
export const eventPagesRoutes: FastifyPluginAsyncTypebox<SessionDeps> = async (app, deps) => {
  const kit = pageKit(deps)
  const webhooks = new WebhookDeliveries(deps)

  app.get(
    '/dashboard',
    kit.page({
      summary: 'The events of the signed-in account (to sign-in without a session)',
      doc: { operationId: 'getDashboardEventsPage', returns: 'The event list page' },
    }),
    async (request, reply) => {
      const session = sessionOf(request)
      const events = await eventsWithFigures(deps, session.viewer, (eventId) => webhooks.partnersOf(eventId))
      return sendPage(reply, eventListPage(session, events))
    },
  )

  app.get(
    '/dashboard/events/:event_id',
    kit.eventPage({
      summary: "One event's figures, refreshed in place (to sign-in without a session)",
      doc: {
        operationId: 'getDashboardEventPage',
        returns: "The event's page",
      },
    }),
    async (request, reply) => {
      const { event_id } = request.params
      const session = sessionOf(request, (viewer) => canSeeEvent(viewer, event_id))
      const event = await findEvent(deps, event_id)
      // The tickets' company_ticket_ids are their partners' own: a dashboard user sees its partner's.
      const flaggedCodeUses = await latestFlaggedCodeUses(
        deps,
        event_id,
        session.viewer.partners === 'all'
          ? undefined
          : visiblePartners(session.viewer, await webhooks.partnersOf(event_id)).map((p) => p.id),
      )
      return sendPage(reply, eventPage(session, event, flaggedCodeUses))
    },
  )
}
