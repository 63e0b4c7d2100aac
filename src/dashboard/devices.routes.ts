import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest, preParsingAsyncHookHandler } from 'fastify'
import { Type } from 'typebox'
import { devicesOf, revokeDevice } from '../devices/devices.service.js'
import { ForbiddenError } from '../platform/errors.js'
import { perMinute } from '../platform/rate-limit.js'
import type { Revocation } from '../tokens/revocations.js'
import { devicesPage } from './devices.templates.js'
import { csrfMatches, type Session, type SessionDeps } from './session.service.js'
import { EventIdParams } from './stats.schemas.js'
import { findEvent } from './stats.service.js'
import { canSeeEvent, type Viewer } from './viewers.js'

/** What the page plugin borrows from the dashboard's page context (dashboard.routes.ts). */
export interface DevicesPageDeps extends SessionDeps {
  /** Publishes a device's ended tokens to every instance at once. */
  publishRevocation: (entry: Revocation) => Promise<void>
  loadSession: preParsingAsyncHookHandler
  sessionOf: (request: FastifyRequest) => Session
  pageSchema: (summary: string, success: 200 | 303, ...statuses: number[]) => Record<string, unknown>
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
function administers(viewer: Viewer, eventId: number): boolean {
  return viewer.kind === 'admin' && canSeeEvent(viewer, eventId)
}

/**
 * The devices page of an event (administrators of the event): each device with its key state, and a
 * form to end its offline tokens, and archive it, as POST /devices/{device_id}/revoke and `wristband
 * device revoke` do (the same `revokeDevice`, audited as `device_revoke`).
 */
export const devicesPageRoutes: FastifyPluginAsyncTypebox<DevicesPageDeps> = async (app, deps) => {
  app.get(
    '/dashboard/events/:event_id/devices',
    {
      config: perMinute(120),
      preParsing: deps.loadSession,
      schema: {
        ...deps.pageSchema(
          "An event's devices (administrators of the event), each with a form to end its offline tokens",
          200,
          303,
          403,
          404,
          422,
        ),
        params: EventIdParams,
        querystring: DevicesQuery,
      },
    },
    async (request, reply) => {
      const session = deps.sessionOf(request)
      const { event_id } = request.params
      if (!administers(session.viewer, event_id)) throw new ForbiddenError()
      const event = await findEvent(deps, event_id)
      const { revoked, archived } = request.query
      const notice =
        revoked === undefined
          ? undefined
          : `The offline tokens of device #${revoked} are revoked${archived ? ' and the device is archived' : ''}.`
      const devices = await devicesOf(deps.db, event_id)
      return reply
        .type('text/html; charset=utf-8')
        .send(devicesPage(session, { event, devices, ...(notice ? { notice } : {}) }))
    },
  )

  app.post(
    '/dashboard/events/:event_id/devices/:device_id/revoke',
    {
      config: perMinute(30),
      preParsing: deps.loadSession,
      schema: {
        ...deps.pageSchema(
          "End a device's offline tokens, and archive it when asked (needs the session and its CSRF token)",
          303,
          403,
          404,
          422,
        ),
        consumes: ['application/x-www-form-urlencoded'],
        params: RevokeParams,
        body: RevokeForm,
      },
    },
    async (request, reply) => {
      const session = deps.sessionOf(request)
      const { event_id, device_id } = request.params
      if (!csrfMatches(session, request.body.csrf_token) || !administers(session.viewer, event_id))
        throw new ForbiddenError('CSRF token missing or wrong, or no access to the event')
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
