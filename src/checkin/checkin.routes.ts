import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { Clock } from '../platform/clock.js'
import { LocalTimeFormatter } from '../platform/formats.js'
import type { JobRunner } from '../platform/jobs/jobs.js'
import { AT, TICKET_UID, TRANSFER_UID } from '../platform/openapi-examples.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import { DEFAULT_LIST, LIST } from './checkin.openapi.js'
import { DirectionSchema, ReasonSchema } from './checkin.schemas.js'
import { CheckinService, type CheckinServiceDeps } from './checkin.service.js'
import { COUNT_OUT_JOB, countOutJob } from './checkin-scan.service.js'

export interface CheckinRoutesDeps extends CheckinServiceDeps {
  tokens: TokenService
  jobs: JobRunner
  clock: Clock
}

const security = [{ OAuth2PasswordBearer: [] }]
const EventParams = Type.Object({ event_id: Type.Integer({ minimum: 1 }) }, { additionalProperties: false })
const ListParams = Type.Object(
  { event_id: Type.Integer({ minimum: 1 }), list_id: Type.Integer({ minimum: 1, maximum: 2 ** 31 - 1 }) },
  { additionalProperties: false },
)
const LocalBound = Type.String({
  pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{3})?$',
  description: 'Event-local time, YYYY-MM-DDTHH:MM:SS (included)',
})
const Window = Type.Object({ from: LocalBound, until: LocalBound }, { additionalProperties: false })
const HourMinute = Type.String({
  pattern: '^([01]\\d|2[0-3]):[0-5]\\d$',
  description: 'Event-local HH:MM at which everyone inside is counted out, every day',
})

const Rules = {
  ticket_type_ids: Type.Union(
    [Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 200 }), Type.Null()],
    {
      description: 'The ticket types (their `ticket_uid`) the list admits; absent or null: every type',
    },
  ),
  allow_multiple_entries: Type.Boolean({
    description: 'A ticket may enter any number of times (default false)',
  }),
  allow_entry_after_exit: Type.Boolean({
    description: 'A ticket may enter again after an exit, or after being counted out (default true)',
  }),
  windows: Type.Union([Type.Array(Window, { maxItems: 100 }), Type.Null()], {
    description: 'The doors: entries are accepted inside one of them; absent, null or empty: always',
  }),
  exit_all_at: Type.Union([HourMinute, Type.Null()]),
}

const Name = Type.String({ minLength: 1, maxLength: 200 })

const ListBody = Type.Object(
  {
    name: Name,
    ticket_type_ids: Type.Optional(Rules.ticket_type_ids),
    allow_multiple_entries: Type.Optional(Rules.allow_multiple_entries),
    allow_entry_after_exit: Type.Optional(Rules.allow_entry_after_exit),
    windows: Type.Optional(Rules.windows),
    exit_all_at: Type.Optional(Rules.exit_all_at),
  },
  { additionalProperties: false },
)
const ListPatch = Type.Partial(ListBody, { additionalProperties: false, minProperties: 1 })

const CheckinList = Type.Object({
  id: Type.Integer(),
  event_id: Type.Integer(),
  name: Type.String(),
  is_default: Type.Boolean({ description: "The event's default list: the specification's single use" }),
  ticket_type_ids: Type.Union([Type.Array(Type.String()), Type.Null()]),
  allow_multiple_entries: Type.Boolean(),
  allow_entry_after_exit: Type.Boolean(),
  windows: Type.Union([Type.Array(Window), Type.Null()]),
  exit_all_at: Type.Union([Type.String(), Type.Null()]),
  archived_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
})

const Count = Type.Integer({ minimum: 0 })
const Status = Type.Object({
  checkin_list_id: Type.Integer(),
  name: Type.String(),
  inside: Type.Integer({ description: 'Tickets inside now: entered, not out since (exit or `exit_all_at`)' }),
  entries: Count,
  exits: Count,
  counted_out: Type.Integer({ description: 'Tickets counted out by `exit_all_at`' }),
  refused: Type.Record(Type.String(), Count, { description: 'Refused scans by reason (reasons met only)' }),
  entries_per_hour: Type.Array(
    Type.Object({ hour: Type.String({ description: 'Event-local YYYY-MM-DDTHH' }), entries: Count }),
  ),
  at: Type.String({ format: 'date-time', description: 'The service time the counts are of' }),
})

const Checkin = Type.Object({
  id: Type.Integer(),
  checkin_list_id: Type.Integer(),
  transfer_uid: Type.String(),
  direction: DirectionSchema,
  result: Type.Union([Type.Literal('accepted'), Type.Literal('refused')]),
  reason: Type.Union([ReasonSchema, Type.Null()]),
  first_use: Type.Boolean({ description: 'This accepted entry made the ticket USED' }),
  scanned_at: Type.String({ format: 'date-time' }),
  local_at: Type.String({ description: "The event's local time of the scan" }),
  gate: Type.Union([Type.String(), Type.Null()]),
  device_id: Type.Union([Type.String(), Type.Null()]),
  actor: Type.String({ description: 'Who scanned: role:subject of the token' }),
  offline: Type.Boolean({ description: 'Uploaded by a device that scanned offline' }),
})

/** Organisers read lists and counts often (a dashboard polls); changes are rare. */
const READ_RATE_LIMIT = 600
const WRITE_RATE_LIMIT = 60

export const checkinRoutes: FastifyPluginAsyncTypebox<CheckinRoutesDeps> = async (app, deps) => {
  const checkin = new CheckinService(deps)
  const localTime = new LocalTimeFormatter()
  deps.jobs.register(
    COUNT_OUT_JOB,
    countOutJob({ db: deps.db, clock: deps.clock, localTime: (ms, tz) => localTime.format(ms, tz) }),
  )
  const staff = protect(deps.tokens, { roles: ['admin', 'operator', 'network_manager'] })
  const tags = ['checkin']

  app.post(
    '/events/:event_id/checkin-lists',
    {
      config: perMinute(WRITE_RATE_LIMIT),
      ...staff,
      schema: {
        tags,
        summary: 'Create a check-in list',
        description:
          "For the event's administrators (`events:manage`) and operators. Ticket types are named by `ticket_uid` and must be the event's (422 otherwise).",
        security,
        params: EventParams,
        body: ListBody,
        response: { 201: CheckinList, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'createCheckinList',
          returns: 'The list, created',
          request: {
            name: 'Camping',
            ticket_type_ids: [TICKET_UID],
            allow_entry_after_exit: true,
            windows: [{ from: '2027-07-16T10:00:00', until: '2027-07-19T12:00:00' }],
          },
          response: LIST,
        },
      },
    },
    async (request, reply) => {
      reply.code(201)
      return checkin.create(claimsOf(request), request.params.event_id, request.body)
    },
  )

  app.get(
    '/events/:event_id/checkin-lists',
    {
      config: perMinute(READ_RATE_LIMIT),
      ...staff,
      schema: {
        tags,
        summary: "The event's check-in lists, the default list first",
        security,
        params: EventParams,
        querystring: Type.Object(
          {
            archived: Type.Optional(Type.Boolean({ description: 'Include archived lists', default: false })),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Array(CheckinList), ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'listCheckinLists',
          returns: 'The lists, the default list first',
          response: [DEFAULT_LIST, LIST],
        },
      },
    },
    async (request) =>
      checkin.lists(claimsOf(request), request.params.event_id, request.query.archived ?? false),
  )

  app.patch(
    '/events/:event_id/checkin-lists/:list_id',
    {
      config: perMinute(WRITE_RATE_LIMIT),
      ...staff,
      schema: {
        tags,
        summary: 'Change a check-in list',
        description:
          'Scanners apply the change from their next sync. The default list cannot be changed (409); an archived one is 404.',
        security,
        params: ListParams,
        body: ListPatch,
        response: { 200: CheckinList, ...errorResponses(401, 403, 404, 409) },
        doc: {
          operationId: 'changeCheckinList',
          returns: 'The list as changed',
          request: { exit_all_at: '04:00' },
          response: { ...LIST, exit_all_at: '04:00' },
        },
      },
    },
    async (request) =>
      checkin.change(claimsOf(request), request.params.event_id, request.params.list_id, request.body),
  )

  app.delete(
    '/events/:event_id/checkin-lists/:list_id',
    {
      config: perMinute(WRITE_RATE_LIMIT),
      ...staff,
      schema: {
        tags,
        summary: 'Archive a check-in list',
        description:
          'It keeps its scans and counts (its status stays readable) and leaves the sync feed; uploads of scans made on it while it was live are still recorded; online scans naming it are 404. The default list cannot be archived (409).',
        security,
        params: ListParams,
        response: { 200: CheckinList, ...errorResponses(401, 403, 404, 409) },
        doc: {
          operationId: 'archiveCheckinList',
          returns: 'The list, archived',
          response: { ...LIST, archived_at: AT },
        },
      },
    },
    async (request) => checkin.archive(claimsOf(request), request.params.event_id, request.params.list_id),
  )

  app.get(
    '/events/:event_id/checkin-lists/:list_id/status',
    {
      config: perMinute(READ_RATE_LIMIT),
      ...staff,
      schema: {
        tags,
        summary: 'How many are inside now, entries, exits, counted out, refusals by reason, entries per hour',
        description:
          'Read from counters kept with the scans: the same cost at ten scans as at a million. Archived lists too.',
        security,
        params: ListParams,
        response: { 200: Status, ...errorResponses(401, 403, 404) },
        doc: {
          operationId: 'checkinListStatus',
          returns: 'The counts now',
          response: {
            checkin_list_id: 12,
            name: 'Camping',
            inside: 1841,
            entries: 2406,
            exits: 565,
            counted_out: 0,
            refused: { already_used: 37, product: 12, invalid_time: 3 },
            entries_per_hour: [
              { hour: '2027-07-16T10', entries: 611 },
              { hour: '2027-07-16T11', entries: 1795 },
            ],
            at: AT,
          },
        },
      },
    },
    async (request) => checkin.status(claimsOf(request), request.params.event_id, request.params.list_id),
  )

  app.get(
    '/events/:event_id/checkins',
    {
      config: perMinute(READ_RATE_LIMIT),
      ...staff,
      schema: {
        tags,
        summary: "The event's scan log, refused scans included, newest first",
        description: 'Follow `next_cursor` (as `cursor`) while it is not null.',
        security,
        params: EventParams,
        querystring: Type.Object(
          {
            checkin_list_id: Type.Optional(Type.Integer({ minimum: 1, maximum: 2 ** 31 - 1 })),
            result: Type.Optional(Type.Union([Type.Literal('accepted'), Type.Literal('refused')])),
            reason: Type.Optional(ReasonSchema),
            device_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
            cursor: Type.Optional(Type.String({ pattern: '^\\d{1,12}$' })),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            checkins: Type.Array(Checkin),
            next_cursor: Type.Union([Type.String(), Type.Null()]),
          }),
          ...errorResponses(401, 403, 404),
        },
        doc: {
          operationId: 'listCheckins',
          returns: 'A page of scans, newest first',
          response: {
            checkins: [
              {
                id: 90412,
                checkin_list_id: 12,
                transfer_uid: TRANSFER_UID,
                direction: 'entry',
                result: 'refused',
                reason: 'already_used',
                first_use: false,
                scanned_at: AT,
                local_at: '2026-07-01T11:30:00.000',
                gate: 'Camping North',
                device_id: '4',
                actor: 'operator:7',
                offline: true,
              },
            ],
            next_cursor: '90412',
          },
        },
      },
    },
    async (request) => {
      const q = request.query
      return checkin.log(
        claimsOf(request),
        request.params.event_id,
        {
          ...(q.checkin_list_id === undefined ? {} : { listId: q.checkin_list_id }),
          ...(q.result === undefined ? {} : { result: q.result }),
          ...(q.reason === undefined ? {} : { reason: q.reason }),
          ...(q.device_id === undefined ? {} : { deviceId: q.device_id }),
        },
        q.cursor === undefined ? undefined : Number(q.cursor),
        q.limit ?? 100,
      )
    },
  )
}
