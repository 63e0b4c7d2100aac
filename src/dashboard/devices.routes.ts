import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { listDevices, revokeDevice } from '../devices/devices.service.js'
import type { Revocation } from '../tokens/revocations.js'
import { devicesPage } from './devices.templates.js'
import { formSession, pageKit, sendPage, sessionOf } from './kit/pages.js'
import type { SessionDeps } from './session.service.js'
import { findEvent } from './stats.service.js'
import { canSeeEvent, type Viewer } from './viewers.js'

export interface DevicesPageDeps extends SessionDeps {
  /** Publishes a device's ended tokens to every instance at once. */
  publishRevocation: (entry: Revocation) => Promise<void>
}

const DevicesQuery = Type.Object(
  { revoked: Type.Optional(Type.Integer({ minimum: 1 })), archived: Type.Optional(Type.Literal('1')) },
  { additionalProperties: false },
)

const RevokeParams = Type.Object({
  event_id: Type.Integer({ minimum: 1 }),
  device_id: Type.Integer({ minimum: 1 }),
})

const RevokeForm = Type.Object(
  {
    csrf_token: Type.String({ minLength: 1, maxLength: 128 }),
    archive: Type.Optional(Type.Literal('1', { description: 'Also archive the device' })),
  },
  { additionalProperties: false },
)

/** Devices are the administrators' of their event: dashboard users and network managers see no page. */
const administers = (eventId: number) => (viewer: Viewer) =>
  viewer.kind === 'admin' && canSeeEvent(viewer, eventId)

/**
 * The devices page of an event (administrators of the event): each device with its key state, and a
 * form to end its offline tokens, and archive it, as POST /devices/{device_id}/revoke and `wristband
 * device revoke` do (the same `revokeDevice`, audited as `device_revoke`).
 */
export const devicesPageRoutes: FastifyPluginAsyncTypebox<DevicesPageDeps> = async (app, deps) => {
  const kit = pageKit(deps)
  app.get(
    '/dashboard/events/:event_id/devices',
    kit.eventPage(
      {
        summary:
          "An event's devices (administrators of the event), each with a form to end its offline tokens",
        doc: {
          operationId: 'getDashboardDevicesPage',
          returns: "The page of the event's devices",
        },
      },
      { querystring: DevicesQuery },
    ),
    async (request, reply) => {
      const { event_id } = request.params
      const session = sessionOf(request, administers(event_id))
      const event = await findEvent(deps, event_id)
      const { revoked, archived } = request.query
      const notice =
        revoked === undefined
          ? undefined
          : `The offline tokens of device #${revoked} are revoked${archived ? ' and the device is archived' : ''}.`
      const devices = await listDevices(deps.db, event_id)
      return sendPage(reply, devicesPage(session, { event, devices, ...(notice ? { notice } : {}) }))
    },
  )

  app.post(
    '/dashboard/events/:event_id/devices/:device_id/revoke',
    kit.form(
      {
        summary:
          "End a device's offline tokens, and archive it when asked (needs the session and its CSRF token)",
        statuses: [403, 404, 422],
        doc: {
          operationId: 'dashboardRevokeDevice',
          returns: "The device's offline tokens are revoked; back to the devices page",
        },
      },
      { params: RevokeParams, body: RevokeForm },
    ),
    async (request, reply) => {
      const { event_id, device_id } = request.params
      const session = formSession(request, request.body.csrf_token, administers(event_id))
      const archive = request.body.archive === '1'
      await revokeDevice(
        deps,
        {
          actor: `${session.viewer.kind}:${session.viewer.id}`,
          // A device of this event only: another event's device is refused even when the viewer has both.
          reaches: (eventId) => eventId === event_id,
        },
        device_id,
        archive,
        request.ip,
      )
      return reply.redirect(
        `/dashboard/events/${event_id}/devices?revoked=${device_id}${archive ? '&archived=1' : ''}`,
        303,
      )
    },
  )
}
