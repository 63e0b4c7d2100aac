import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { ConflictError, ForbiddenError, NotFoundError, ValidationFailed } from '../platform/errors.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import { TicketsService, type TicketsServiceDeps } from './tickets.service.js'

export interface TicketRoutesDeps extends TicketsServiceDeps {
  tokens: TokenService
  /** OFFLINE_TOKEN_EXPIRE_HOURS: how far back an offline scan's `used_at` may lie. */
  offlineHours: number
}

/**
 * The scanners of a gate usually share one public address (one NAT), and a gate lets a few people
 * through per second per lane: 3000 per minute per address leaves room for a dozen lanes behind one
 * address while still stopping a runaway client.
 */
export const TICKET_USE_RATE_LIMIT = 3000
export const MAX_BATCH = 500
/** How far ahead of the service's clock a device's clock may run. */
export const USED_AT_MAX_AHEAD_MS = 5 * 60_000

const security = [{ OAuth2PasswordBearer: [] }]
const TransferUid = Type.String({ pattern: '^[0-9a-f]{32}$' })
const Gate = Type.String({ minLength: 1, maxLength: 100 })
const LocalTimestamp = Type.String({ description: "Event's local time, YYYY-MM-DDThh:mm:ss.SSS" })
const ISO_WITH_OFFSET = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?(Z|[+-]\\d{2}:\\d{2})$'

const UseRequest = Type.Object({ access_gate: Type.Optional(Gate) }, { additionalProperties: false })

const BatchRequest = Type.Object(
  {
    scans: Type.Array(
      Type.Object(
        {
          transfer_uid: Type.String({ minLength: 1, maxLength: 64 }),
          used_at: Type.String({
            pattern: ISO_WITH_OFFSET,
            description: 'When the device scanned the ticket, ISO 8601 with an offset',
          }),
          access_gate: Type.Optional(Gate),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: MAX_BATCH },
    ),
  },
  { additionalProperties: false },
)

const BatchResult = Type.Object({
  transfer_uid: Type.String(),
  status: Type.Union([
    Type.Literal('USED'),
    Type.Literal('ALREADY_USED'),
    Type.Literal('NOT_FOUND'),
    Type.Literal('FORBIDDEN'),
  ]),
  used_timestamp: Type.Optional(LocalTimestamp),
})

export const ticketRoutes: FastifyPluginAsyncTypebox<TicketRoutesDeps> = async (app, deps) => {
  const tickets = new TicketsService(deps)
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
        summary: 'Use (scan) a ticket; the first use wins',
        description:
          "Needs `ticket:scan` for the ticket's event. A second use answers 409 with the first `used_timestamp`.",
        security,
        params: Type.Object({ transfer_uid: TransferUid }, { additionalProperties: false }),
        body: UseRequest,
        response: {
          200: Type.Object({ status: Type.Literal('USED'), used_timestamp: LocalTimestamp }),
          ...errorResponses(401, 403, 404, 409),
        },
      },
    },
    async (request) => {
      const claims = claimsOf(request)
      // A token that may scan nowhere is refused before the ticket is looked up (403 before 404).
      if (!Object.values(claims.permissions ?? {}).some((scopes) => scopes.includes('ticket:scan')))
        throw new ForbiddenError('This token lacks ticket:scan')
      const r = await tickets.use(claims, ['ticket:scan'], request.params.transfer_uid, {
        usedAt: deps.clock.now(),
        gate: request.body.access_gate ?? null,
      })
      switch (r.status) {
        case 'USED':
          return r
        case 'NOT_FOUND':
          throw new NotFoundError('Unknown ticket')
        case 'FORBIDDEN':
          throw new ForbiddenError("This token lacks ticket:scan for the ticket's event")
        case 'ALREADY_USED':
          throw new ConflictError('Ticket already used', 'already_used', {
            used_timestamp: r.used_timestamp,
          })
      }
    },
  )

  app.post(
    '/tickets/use-batch',
    {
      config: perMinute(TICKET_USE_RATE_LIMIT),
      ...guard,
      schema: {
        tags: ['tickets'],
        summary: 'Upload scans a device recorded offline (at most 500), answered per scan in order',
        description:
          "Needs `sync:upload` or `ticket:scan` for each ticket's event. The first scan the service processes counts and its `used_at` becomes `used_timestamp`; every later one is ALREADY_USED. A scan whose `used_at` lies outside [now − OFFLINE_TOKEN_EXPIRE_HOURS, now + 5 min] is FORBIDDEN and changes nothing.",
        security,
        body: BatchRequest,
        response: { 200: Type.Object({ results: Type.Array(BatchResult) }), ...errorResponses(401, 403) },
      },
    },
    async (request) => {
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
      const scopes = Object.values(claims.permissions ?? {}).flat()
      if (!scopes.includes('sync:upload') && !scopes.includes('ticket:scan'))
        throw new ForbiddenError('This token lacks sync:upload and ticket:scan')
      const results = []
      // A scan can only have happened while an offline token was valid: `used_at` before that (e.g. a
      // holder's ticket marked used in 2020) or in the future is refused, and nothing changes.
      const now = deps.clock.now()
      const earliest = now - deps.offlineHours * 3_600_000
      const latest = now + USED_AT_MAX_AHEAD_MS
      // In order, one at a time: a ticket scanned twice in one batch is USED, then ALREADY_USED.
      for (const s of scans) {
        if (s.usedAt < earliest || s.usedAt > latest) {
          results.push({ transfer_uid: s.transfer_uid, status: 'FORBIDDEN' as const })
          continue
        }
        const r = await tickets.use(claims, ['sync:upload', 'ticket:scan'], s.transfer_uid, {
          usedAt: s.usedAt,
          gate: s.access_gate ?? null,
        })
        results.push({ transfer_uid: s.transfer_uid, ...r })
      }
      return { results }
    },
  )
}
