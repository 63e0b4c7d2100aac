import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { DirectionSchema, ReasonSchema } from '../checkin/checkin.schemas.js'
import type { EdgeKeys } from '../edge/edge-keys.js'
import type { Config } from '../platform/config.js'
import { ConflictError, ForbiddenError, NotFoundError, ValidationFailed } from '../platform/errors.js'
import { DEVICE_KEY_REQUIRED, TRANSFER_UID, USED_LOCAL, USED_UTC } from '../platform/openapi-examples.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { isKeylessDevice, KEYLESS_DEVICE } from '../tokens/claims.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import { MAX_SCANNED_CODE, verifyScannedCode } from './scanned-code.js'
import {
  type ScanOutcome,
  TicketsService,
  type TicketsServiceDeps,
  USED_AT_MAX_AHEAD_MS,
} from './tickets.service.js'

export interface TicketRoutesDeps extends Omit<TicketsServiceDeps, 'log'> {
  tokens: TokenService
  /** OFFLINE_TOKEN_EXPIRE_HOURS: how far back an offline scan's `used_at` may lie before it is clock_adjusted. */
  config: Pick<Config, 'OFFLINE_TOKEN_EXPIRE_HOURS'>
  /** The edge keys, which check the codes scans carry. */
  edgeKeys: EdgeKeys
}

/**
 * The scanners of a gate usually share one public address (one NAT), and a gate lets a few people
 * through per second per lane: 3000 per minute per address leaves room for a dozen lanes behind one
 * address while still stopping a runaway client.
 */
export const TICKET_USE_RATE_LIMIT = 3000
export const MAX_BATCH = 500

const security = [{ OAuth2PasswordBearer: [] }]
const TransferUid = Type.String({ pattern: '^[0-9a-f]{32}$' })
const Gate = Type.String({ minLength: 1, maxLength: 100 })
const LocalTimestamp = Type.String({ description: "Event's local time, YYYY-MM-DDThh:mm:ss.SSS" })
const ISO_WITH_OFFSET = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?(Z|[+-]\\d{2}:\\d{2})$'

const ListId = Type.Integer({
  minimum: 1,
  maximum: 2 ** 31 - 1,
  description: "The check-in list (GET /events/{event_id}/checkin-lists); absent: the event's default list",
})
const Direction = DirectionSchema
const Reason = ReasonSchema

const UseRequest = Type.Object(
  {
    access_gate: Type.Optional(Gate),
    checkin_list_id: Type.Optional(ListId),
    direction: Type.Optional(Direction),
  },
  { additionalProperties: false },
)

const BatchRequest = Type.Object(
  {
    scans: Type.Array(
      Type.Object(
        {
          transfer_uid: Type.String({ minLength: 1, maxLength: 64 }),
          used_at: Type.String({
            pattern: ISO_WITH_OFFSET,
            description:
              'When the device scanned the ticket, ISO 8601 with an offset. Outside [now − OFFLINE_TOKEN_EXPIRE_HOURS, now + 5 min] the scan is recorded at the time the service receives it, with `clock_adjusted`',
          }),
          access_gate: Type.Optional(Gate),
          version: Type.Optional(
            Type.Integer({
              minimum: 1,
              maximum: 2 ** 31 - 1,
              description:
                "The scanned code's version (its `n`); a version below the ticket's current one is a re-issued code: the scan still counts, flagged `revoked_code`; one above it was never issued: the scan still counts, flagged `unknown_code`",
            }),
          ),
          checkin_list_id: Type.Optional(ListId),
          direction: Type.Optional(Direction),
          nonce: Type.Optional(
            Type.String({
              minLength: 8,
              maxLength: 64,
              pattern: '^[A-Za-z0-9_-]+$',
              description:
                'Unique per scan (the scanner sends 128 random bits, base64url): a scan uploaded again under its nonce is answered as the first time and counts nothing twice',
            }),
          ),
          reason: Type.Optional(Reason),
          code: Type.Optional(
            Type.String({
              minLength: 1,
              maxLength: MAX_SCANNED_CODE,
              description:
                "The scanned code itself, instead of (or with) its `version`. Checked as a ticket code of this `transfer_uid` (its `typ`, an edge key's signature); its version then wins over `version`, and a scan dated before that version was issued is `clock_adjusted`. A code that does not check out still counts the scan, as one without a version, flagged `unknown_code`",
            }),
          ),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: MAX_BATCH },
    ),
  },
  {
    additionalProperties: false,
    examples: [
      {
        scans: [
          {
            transfer_uid: '5f1c0e7a9b2d4c6e8f0a1b3c5d7e9f01',
            used_at: '2026-07-18T20:15:30.123Z',
            access_gate: 'North',
            version: 1,
          },
        ],
      },
    ],
  },
)

const BatchResult = Type.Object({
  transfer_uid: Type.String(),
  status: Type.Union(
    [
      Type.Literal('USED'),
      Type.Literal('ALREADY_USED'),
      Type.Literal('REFUSED'),
      Type.Literal('NOT_FOUND'),
      Type.Literal('FORBIDDEN'),
    ],
    {
      description:
        "`USED`: accepted (`first_use` tells whether it made the ticket USED); `ALREADY_USED`: refused `already_used`, with the ticket's use; `REFUSED`: refused for `reason`; `FORBIDDEN`: this token may not scan this ticket (and only that)",
    },
  ),
  checkin_list_id: Type.Optional(Type.Integer({ description: 'The list the scan was recorded on' })),
  direction: Type.Optional(Direction),
  first_use: Type.Optional(
    Type.Boolean({ description: 'With `USED`: this accepted entry made the ticket USED (its first use)' }),
  ),
  reason: Type.Optional(Reason),
  used_timestamp: Type.Optional(LocalTimestamp),
  used_at: Type.Optional(
    Type.String({ format: 'date-time', description: 'The counted use, UTC (ISO 8601 with Z)' }),
  ),
  clock_adjusted: Type.Optional(
    Type.Literal(true, {
      description:
        "The scan's `used_at` lay outside the accepted window, or before the scanned code existed (before the ticket was created, or before the version a carried `code` shows was issued): recorded at the service's time (the claimed time is in the audit log)",
    }),
  ),
  revoked_code: Type.Optional(
    Type.Literal(true, {
      description: 'The scanned code version had been re-issued; the scan counts all the same',
    }),
  ),
  unknown_code: Type.Optional(
    Type.Literal(true, {
      description:
        'The scanned code was never issued for this ticket (a `version` above its current one, or a `code` that does not verify as one of its codes); the scan counts all the same',
    }),
  ),
})

/** A refusal of a single use: 409 with `error` and `reason` both the reason code. */
function refusal(r: Extract<ScanOutcome, { status: 'REFUSED' }>) {
  const extra = { reason: r.reason, checkin_list_id: r.checkin_list_id, direction: r.direction }
  switch (r.reason) {
    case 'product':
      return new ConflictError('The ticket type is not on this check-in list', 'product', extra)
    case 'invalid_time':
      return new ConflictError('Outside the check-in list’s times', 'invalid_time', extra)
    case 'wrong_event':
      return new ConflictError('The ticket is of another event', 'wrong_event', extra)
    default:
      return new ConflictError(`Refused: ${r.reason}`, 'conflict', extra)
  }
}

/** One answer of use-batch. */
function batchResult(transferUid: string, r: ScanOutcome) {
  switch (r.status) {
    case 'USED': {
      const { usedAt, firstUse, ...answer } = r
      return {
        transfer_uid: transferUid,
        ...answer,
        first_use: firstUse,
        used_at: new Date(usedAt).toISOString(),
      }
    }
    case 'ALREADY_USED': {
      const { usedAt, ...answer } = r
      return {
        transfer_uid: transferUid,
        ...answer,
        ...(r.checkin_list_id === undefined ? {} : { reason: 'already_used' as const }),
        used_at: new Date(usedAt).toISOString(),
      }
    }
    case 'REFUSED':
      return { transfer_uid: transferUid, ...r }
    case 'NO_LIST':
      // The list named is no list of this token's events (or was archived before an online scan).
      return { transfer_uid: transferUid, status: 'REFUSED' as const, reason: 'error' as const }
    default:
      return { transfer_uid: transferUid, status: r.status }
  }
}

export const ticketRoutes: FastifyPluginAsyncTypebox<TicketRoutesDeps> = async (app, deps) => {
  const tickets = new TicketsService({ ...deps, log: app.log })
  const guard = protect(deps.tokens, { types: ['access', 'offline'] })

  app.post(
    '/tickets/:transfer_uid/use',
    {
      config: perMinute(TICKET_USE_RATE_LIMIT),
      ...guard,
      // The body is optional: a bare POST is a use without a gate.
      preValidation: async (request) => {
        request.body ??= {}
      },
      schema: {
        tags: ['tickets'],
        summary: 'Use (scan) a ticket on a check-in list; the first accepted entry makes it USED',
        description:
          "Needs `ticket:scan` for the ticket's event. Without `checkin_list_id` the scan is an entry on the event's default list, the specification's single use: a second use answers 409 `already_used` with the first `used_timestamp`. On another list the list's rules decide (docs/gate.md): a refusal answers 409 with `error` and `reason` both the reason code, and is recorded. 404 for an unknown ticket or list.",
        security,
        params: Type.Object({ transfer_uid: TransferUid }, { additionalProperties: false }),
        body: UseRequest,
        response: {
          200: Type.Object({
            status: Type.Literal('USED'),
            used_timestamp: LocalTimestamp,
            used_at: Type.String({
              format: 'date-time',
              description: 'The same instant in UTC (ISO 8601 with Z)',
            }),
            checkin_list_id: Type.Integer({ description: 'The list the scan was recorded on' }),
            direction: Direction,
            first_use: Type.Boolean({ description: 'This entry made the ticket USED (its first use)' }),
          }),
          ...errorResponses(401, 403, 404, 409),
        },
        doc: {
          operationId: 'useTicket',
          returns: 'The ticket is used (the first use)',
          bodyOptional: true,
          request: { access_gate: 'North', checkin_list_id: 12, direction: 'entry' },
          response: {
            status: 'USED',
            used_timestamp: USED_LOCAL,
            used_at: USED_UTC,
            checkin_list_id: 12,
            direction: 'entry',
            first_use: true,
          },
          errors: {
            409: [
              {
                code: 'already_used',
                when: 'no entry allowed now: the ticket entered already (on the default list: it was used); `used_timestamp` tells when it was first used',
                detail: 'Ticket already used',
                extra: {
                  reason: 'already_used',
                  used_timestamp: USED_LOCAL,
                  used_at: USED_UTC,
                  checkin_list_id: 12,
                  direction: 'entry',
                },
              },
              {
                code: 'product',
                when: "the ticket's type is not on the list",
                detail: 'The ticket type is not on this check-in list',
                extra: { reason: 'product', checkin_list_id: 12, direction: 'entry' },
              },
              {
                code: 'invalid_time',
                when: "outside the list's windows",
                detail: 'Outside the check-in list’s times',
                extra: { reason: 'invalid_time', checkin_list_id: 12, direction: 'entry' },
              },
              {
                code: 'wrong_event',
                when: 'the ticket is of another event than the list',
                detail: 'The ticket is of another event',
                extra: { reason: 'wrong_event', checkin_list_id: 12, direction: 'entry' },
              },
            ],
          },
        },
      },
    },
    async (request) => {
      const claims = claimsOf(request)
      // A token that may scan nowhere is refused before the ticket is looked up (403 before 404).
      if (!Object.values(claims.permissions ?? {}).some((scopes) => scopes.includes('ticket:scan')))
        throw new ForbiddenError('This token lacks ticket:scan')
      const { access_gate, checkin_list_id, direction = 'entry' } = request.body
      const r = await tickets.use(
        claims,
        ['ticket:scan'],
        request.params.transfer_uid,
        { usedAt: deps.clock.now(), gate: access_gate ?? null },
        { ...(checkin_list_id === undefined ? {} : { listId: checkin_list_id }), direction },
      )
      switch (r.status) {
        case 'USED':
          return {
            status: r.status,
            used_timestamp: r.used_timestamp,
            used_at: new Date(r.usedAt).toISOString(),
            checkin_list_id: r.checkin_list_id,
            direction: r.direction,
            first_use: r.firstUse,
          }
        case 'NOT_FOUND':
          throw new NotFoundError('Unknown ticket')
        case 'NO_LIST':
          throw new NotFoundError('Unknown check-in list')
        case 'FORBIDDEN':
          throw new ForbiddenError("This token lacks ticket:scan for the ticket's event")
        case 'ALREADY_USED':
          throw new ConflictError('Ticket already used', 'already_used', {
            reason: 'already_used',
            used_timestamp: r.used_timestamp,
            used_at: new Date(r.usedAt).toISOString(),
            checkin_list_id: r.checkin_list_id,
            direction: r.direction,
          })
        case 'REFUSED':
          throw refusal(r)
      }
    },
  )

  app.post(
    '/tickets/use-batch',
    {
      // 500 scans of the largest size (a code, a gate of 100 characters, a list, a nonce): the
      // service-wide BODY_LIMIT_BYTES is for single requests (a scanner's batch of 500 with nonces and
      // lists is about 110 KB).
      bodyLimit: MAX_BATCH * 3 * 1024,
      config: perMinute(TICKET_USE_RATE_LIMIT),
      ...guard,
      schema: {
        tags: ['tickets'],
        summary: 'Upload scans a device recorded offline (at most 500), answered per scan in order',
        description:
          "Needs `sync:upload` or `ticket:scan` for each ticket's event. The first scan the service processes counts and its `used_at` becomes `used_timestamp`; every later one is ALREADY_USED. A person who got in is never lost: a scan whose `used_at` lies outside [now − OFFLINE_TOKEN_EXPIRE_HOURS, now + 5 min] (a device clock far off, an upload days late), or before the scanned code existed (the ticket's creation; the issue of the version a carried `code` shows), is recorded at the time the service receives it and answered with `clock_adjusted: true`. A scan may carry the scanned code's `version` or the `code` itself: one of a re-issued code counts too, answered with `revoked_code: true`; one of a code never issued for the ticket (a version above the current one, a code that does not verify as this ticket's) counts, answered with `unknown_code: true`. Each scan may name a `checkin_list_id` and `direction` (default: an entry on the event's default list, the specification's single use); the list's rules decide it again (docs/gate.md), a refusal is recorded and answered `REFUSED` with its `reason` (`ALREADY_USED` for `already_used`). A `nonce` makes the upload idempotent: a scan sent again under its nonce is answered as before and counted once. A scan the device refused offline carries its `reason` and is recorded as refused. FORBIDDEN means only that this token may not scan this ticket.",
        security,
        body: BatchRequest,
        response: { 200: Type.Object({ results: Type.Array(BatchResult) }), ...errorResponses(401, 403) },
        doc: {
          operationId: 'useTicketBatch',
          errors: DEVICE_KEY_REQUIRED,
          returns: 'One result per scan, in order',
          request: {
            scans: [
              {
                transfer_uid: TRANSFER_UID,
                used_at: '2026-07-18T20:15:30.123Z',
                access_gate: 'North',
                version: 1,
                checkin_list_id: 12,
                direction: 'entry',
                nonce: 'q1Xv3b8Jc0LrT5nW2yZk7A',
              },
            ],
          },
          response: {
            results: [
              {
                transfer_uid: TRANSFER_UID,
                status: 'USED',
                used_timestamp: USED_LOCAL,
                used_at: USED_UTC,
                checkin_list_id: 12,
                direction: 'entry',
                first_use: true,
              },
              {
                transfer_uid: '7c2e4a6b8d0f1e3a5c7e9b1d3f5a7c9e',
                status: 'REFUSED',
                reason: 'product',
                checkin_list_id: 12,
                direction: 'entry',
              },
              {
                transfer_uid: '5f1c0e7a9b2d4c6e8f0a1b3c5d7e9f01',
                status: 'ALREADY_USED',
                used_timestamp: '2026-07-18T20:02:47.000',
                used_at: '2026-07-18T18:02:47.000Z',
              },
              {
                transfer_uid: '2a4c6e8f0b1d3f5a7c9e1b3d5f7a9c0e',
                status: 'USED',
                used_timestamp: '2026-07-18T20:16:05.000',
                used_at: '2026-07-18T18:16:05.000Z',
                revoked_code: true,
              },
              { transfer_uid: '0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a', status: 'NOT_FOUND' },
            ],
          },
        },
      },
    },
    async (request, reply) => {
      // The service's time, which decides the window: scanners correct their clocks by it.
      reply.header('date', new Date(deps.clock.now()).toUTCString())
      const claims = claimsOf(request)
      const scans = request.body.scans.map((s, i) => {
        const usedAt = Date.parse(s.used_at)
        if (Number.isNaN(usedAt))
          throw new ValidationFailed([
            {
              loc: ['body', 'scans', i, 'used_at'],
              msg: 'Value error, not a real date and time',
              type: 'value_error',
              input: s.used_at,
            },
          ])
        return { ...s, usedAt }
      })
      // As for a single use: a token that may upload or scan nowhere is refused as a whole (403), not
      // answered per scan, which would also tell it which transfer_uids exist.
      if (isKeylessDevice(claims)) throw new ForbiddenError(KEYLESS_DEVICE, 'device_key_required')
      const scopes = Object.values(claims.permissions ?? {}).flat()
      if (!scopes.includes('sync:upload') && !scopes.includes('ticket:scan'))
        throw new ForbiddenError('This token lacks sync:upload and ticket:scan')
      const results = []
      // A person who got in is never lost: a device time outside the window (a wrong clock, an upload
      // days later) is recorded at the service's time, flagged, rather than refused. Nothing is backdated
      // before the window, nor before the ticket (the code the device held) existed, so an offline token
      // cannot rewrite history; the service decides the latter, against the ticket.
      const now = deps.clock.now()
      const window = {
        earliest: now - deps.config.OFFLINE_TOKEN_EXPIRE_HOURS * 3_600_000,
        latest: now + USED_AT_MAX_AHEAD_MS,
        receivedAt: now,
      }
      // In order, one at a time: a ticket scanned twice in one batch is USED, then ALREADY_USED.
      for (const s of scans) {
        // A code that does not verify fails neither the batch nor the scan: the person got in.
        const code =
          s.code === undefined
            ? undefined
            : ((await verifyScannedCode(deps.edgeKeys, s.code, s.transfer_uid)) ?? ('unknown' as const))
        const r = await tickets.use(
          claims,
          ['sync:upload', 'ticket:scan'],
          s.transfer_uid,
          {
            usedAt: s.usedAt,
            gate: s.access_gate ?? null,
            offline: { claimedAt: s.used_at, ...window },
            ...(s.version === undefined ? {} : { version: s.version }),
            ...(code === undefined ? {} : { code }),
          },
          {
            direction: s.direction ?? 'entry',
            ...(s.checkin_list_id === undefined ? {} : { listId: s.checkin_list_id }),
            ...(s.nonce === undefined ? {} : { nonce: s.nonce }),
            ...(s.reason === undefined ? {} : { refusedOffline: s.reason }),
          },
        )
        results.push(batchResult(s.transfer_uid, r))
      }
      return { results }
    },
  )
}
