import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { type Static, Type } from 'typebox'
import { eventExists } from '../events/events.store.js'
import { CompanyTicketIdParams, TicketCode } from '../partner/partner.schemas.js'
import { PARTNER_RATE_LIMIT, partnerAuth, partnerOf } from '../partner/partner-auth.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { ConflictError, ForbiddenError, NotFoundError, ServiceUnavailableError } from '../platform/errors.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { hasScope } from '../tokens/claims.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import type { EdgeKeys } from './edge-keys.js'
import { feedPage, findTransferForReissue, replaceCode } from './scan-sync.store.js'
import type { TicketCodes } from './ticket-codes.js'

export interface EdgeRoutesDeps {
  db: Db
  clock: Clock
  tokens: TokenService
  keys: EdgeKeys
  codes: TicketCodes
}

/** A full sync of 100,000 tickets is 20 pages; scanners poll every few seconds to a minute. */
const SCAN_SYNC_RATE_LIMIT = 600
const FEED_PAGE = 5000

const Jwk = Type.Object({
  kty: Type.Literal('OKP'),
  crv: Type.Literal('Ed25519'),
  x: Type.String(),
  kid: Type.String(),
  alg: Type.Literal('EdDSA'),
  use: Type.Literal('sig'),
})

const FeedEntry = Type.Object({
  transfer_uid: Type.String(),
  ticket_uid: Type.String(),
  change: Type.Union([Type.Literal('new'), Type.Literal('revoked'), Type.Literal('used')], {
    description:
      '`new`: code version 1, unused; `revoked`: the ticket was re-issued, codes below `version` are revoked; `used`: the ticket was used (first use counts)',
  }),
  version: Type.Integer({ description: 'Version of the current code; lower versions are revoked' }),
  digest: Type.Union([Type.String(), Type.Null()], {
    description: 'First 128 bits of SHA-256 of the current code, base64url (null: the ticket has no code)',
  }),
  used_timestamp: Type.Union([Type.String(), Type.Null()], { description: "Event's local time of the use" }),
  used_gate: Type.Union([Type.String(), Type.Null()]),
})

const FeedPage = Type.Object({
  event_id: Type.Integer(),
  key_ids: Type.Array(Type.String(), {
    description: 'Key ids of /.well-known/jwks.json; fetch it again when one is unknown',
  }),
  tickets: Type.Array(FeedEntry),
  cursor: Type.String({ description: 'Pass as `cursor` for the changes after this page' }),
  has_more: Type.Boolean({ description: 'Another page follows at once' }),
})

export const edgeRoutes: FastifyPluginAsyncTypebox<EdgeRoutesDeps> = async (app, deps) => {
  const { db, keys, codes } = deps

  app.get(
    '/.well-known/jwks.json',
    {
      config: perMinute(600),
      schema: {
        tags: ['offline'],
        summary: 'Public keys (JWK Set) of the edge key: ticket codes and EdDSA offline tokens',
        description:
          'The current key first, then earlier ones still trusted (EDGE_PREVIOUS_KEYS). Cacheable for five minutes.',
        response: { 200: Type.Object({ keys: Type.Array(Jwk) }), ...errorResponses() },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=300')
      return keys.jwks as { keys: Static<typeof Jwk>[] }
    },
  )

  app.get(
    '/events/:event_id/scan-sync',
    {
      config: perMinute(SCAN_SYNC_RATE_LIMIT),
      ...protect(deps.tokens, { types: ['access', 'offline'] }),
      schema: {
        tags: ['offline'],
        summary: "The scanner sync feed: the event's tickets changed since a cursor",
        description:
          'Needs `ticket:scan` or `sync:download` for the event. Without `cursor`: every ticket of the event ' +
          '(a full sync, paginated); with it: the tickets changed since, each once with its latest state. ' +
          'Follow `cursor` while `has_more`; keep the last `cursor` for the next sync.',
        security: [{ OAuth2PasswordBearer: [] }],
        params: Type.Object({ event_id: Type.Integer({ minimum: 1 }) }, { additionalProperties: false }),
        querystring: Type.Object(
          {
            cursor: Type.Optional(Type.String({ pattern: '^\\d{1,15}$' })),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: FEED_PAGE, default: FEED_PAGE })),
          },
          { additionalProperties: false },
        ),
        response: { 200: FeedPage, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const claims = claimsOf(request)
      const eventId = request.params.event_id
      if (!hasScope(claims, eventId, 'ticket:scan') && !hasScope(claims, eventId, 'sync:download'))
        throw new ForbiddenError('This token lacks ticket:scan and sync:download for the event')
      if (!(await eventExists(db, eventId))) throw new NotFoundError('Event not found')
      const cursor = Number(request.query.cursor ?? 0)
      const limit = request.query.limit ?? FEED_PAGE
      const rows = await feedPage(db, eventId, cursor, limit + 1)
      const page = rows.slice(0, limit)
      return {
        event_id: eventId,
        key_ids: keys.keys.map((k) => k.kid),
        tickets: page.map((r) => ({
          transfer_uid: r.transfer_uid,
          ticket_uid: r.ticket_uid,
          change:
            r.used_timestamp !== null
              ? ('used' as const)
              : r.code_version > 1
                ? ('revoked' as const)
                : ('new' as const),
          version: r.code_version,
          digest: r.code_digest,
          used_timestamp: r.used_timestamp,
          used_gate: r.used_gate,
        })),
        cursor: String(page.length ? Number(page[page.length - 1]!.feed_seq) : cursor),
        has_more: rows.length > limit,
      }
    },
  )

  const write = partnerAuth(deps, 'write')
  app.post(
    '/companies/transfer/:company_ticket_id/reissue',
    {
      config: perMinute(PARTNER_RATE_LIMIT),
      ...write,
      schema: {
        tags: ['partner'],
        summary: 'Issue a new ticket code for a transfer; the previous code is revoked',
        description:
          'For a lost or leaked code. Scanners learn of the revocation at their next sync. A used ticket answers 409 `already_used`.',
        security: [{ APIKeyHeader: [] }],
        params: CompanyTicketIdParams,
        response: {
          200: Type.Object({
            transfer_uid: Type.String(),
            company_ticket_id: Type.String(),
            code_version: Type.Integer(),
            ticket_code: TicketCode,
          }),
          ...errorResponses(401, 403, 404, 409, 503),
        },
      },
    },
    async (request) => {
      const partner = partnerOf(request)
      const id = request.params.company_ticket_id
      const t = await findTransferForReissue(db, partner.eventId, id)
      if (!t) throw new NotFoundError('No transfer with this company_ticket_id in this event')
      if (!codes.enabled) throw new ServiceUnavailableError('The service has no edge signing key')
      const used = () =>
        new ConflictError('A used ticket keeps its code', 'already_used', {
          used_timestamp: t.used_timestamp,
        })
      if (t.used_timestamp !== null) throw used()
      const code = (await codes.issue({
        eventId: partner.eventId,
        transferUid: t.uid,
        ticketUid: t.ticket_uid,
        version: t.code_version + 1,
        issuedAt: deps.clock.now(),
        ticketDate: t.ticket_date,
      }))!
      if (!(await replaceCode(db, { id: t.id, eventId: partner.eventId, fromVersion: t.code_version }, code)))
        throw new ConflictError('The ticket was used or re-issued meanwhile', 'concurrent_change')
      return {
        transfer_uid: t.uid,
        company_ticket_id: id,
        code_version: t.code_version + 1,
        ticket_code: code.code,
      }
    },
  )
}
