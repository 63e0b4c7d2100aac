import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { type Static, Type } from 'typebox'
import { CompanyTicketIdParams, TicketCode } from '../partner/partner.schemas.js'
import { type PartnerAuthDeps, partnerAuth, partnerOf } from '../partner/partner-auth.js'
import { ForbiddenError, ValidationFailed } from '../platform/errors.js'
import {
  DEVICE_KEY_REQUIRED,
  TICKET_CODE,
  TICKET_UID,
  TRANSFER_UID,
  USED_LOCAL,
  USED_UTC,
} from '../platform/openapi-examples.js'
import type { RequestPrecedence } from '../platform/precedence.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { hasScope, isKeylessDevice, KEYLESS_DEVICE } from '../tokens/claims.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import { EdgeService, type EdgeServiceDeps, FEED_PAGE_SIZE, type SnapshotPage } from './edge.service.js'

export interface EdgeRoutesDeps
  extends EdgeServiceDeps,
    Pick<PartnerAuthDeps, 'partnerRateLimit' | 'apiKeys'> {
  tokens: TokenService
  /** A first sync's pages wait for the instance's other requests (the gate's scans first). */
  precedence: RequestPrecedence
}

/** A full sync of 100,000 tickets is 20 pages; scanners poll every few seconds to a minute. */
const SCAN_SYNC_RATE_LIMIT = 600
/**
 * The longest a first sync's page waits for the instance's other requests to be answered: a scanner's
 * first sync goes on, a page at a time, however busy the gates are.
 */
const PAGE_YIELDS_AT_MOST_MS = 50
const FEED_PAGE = FEED_PAGE_SIZE

/** The encoding a client takes, of those a snapshot page is stored in (q=0 refuses one). */
function acceptedEncoding(header: string | undefined): 'br' | 'gzip' | undefined {
  const offered = new Set(
    (header ?? '')
      .split(',')
      .map((part) => part.trim().toLowerCase())
      .filter((part) => !/;\s*q=0(\.0*)?$/.test(part))
      .map((part) => part.split(';')[0]!.trim()),
  )
  return offered.has('br') ? 'br' : offered.has('gzip') ? 'gzip' : undefined
}

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
  used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'The time of the use in UTC (ISO 8601 with Z), the instant of used_timestamp',
  }),
  used_gate: Type.Union([Type.String(), Type.Null()]),
})

const CheckinListOfFeed = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  is_default: Type.Boolean(),
  ticket_type_ids: Type.Union([Type.Array(Type.String()), Type.Null()]),
  allow_multiple_entries: Type.Boolean(),
  allow_entry_after_exit: Type.Boolean(),
  windows: Type.Union([Type.Array(Type.Object({ from: Type.String(), until: Type.String() })), Type.Null()]),
  exit_all_at: Type.Union([Type.String(), Type.Null()]),
})

/** With every page of changes (not the pages of a shared first-sync snapshot): what scanners apply offline. */
const FeedLists = {
  timezone: Type.Optional(
    Type.String({ description: "The event's time zone (IANA): list windows are its local time" }),
  ),
  checkin_lists: Type.Optional(
    Type.Array(CheckinListOfFeed, {
      description:
        "The event's live check-in lists as they are now, the default list first (docs/gate.md): sent with every page of changes, so a first sync, which ends with one, brings them too",
    }),
  ),
}

const ColumnsPage = Type.Object(
  {
    format: Type.Literal('columns'),
    event_id: Type.Integer(),
    key_ids: Type.Array(Type.String()),
    ticket_types: Type.Array(Type.String(), { description: 'Ticket type uids; `types` index into it' }),
    gates: Type.Array(Type.String(), {
      description: 'Gates of the uses; `used[k][2]` indexes into it (-1: none)',
    }),
    count: Type.Integer({ description: 'Tickets in the page' }),
    ids: Type.String({
      description: 'Per ticket, the first 16 hex characters of its transfer uid, concatenated',
    }),
    digests: Type.String({
      description: 'Per ticket, its code digest (22 characters; 22 `~` without a code), concatenated',
    }),
    types: Type.Array(Type.Integer(), { description: "Per ticket, its ticket type's index" }),
    versions: Type.Array(Type.Array(Type.Integer(), { minItems: 2, maxItems: 2 }), {
      description: '`[ticket index, code version]` for versions above 1 (re-issued codes)',
    }),
    used: Type.Array(Type.Array(Type.Integer(), { minItems: 3, maxItems: 3 }), {
      description: '`[ticket index, used at (epoch ms, UTC), gate index or -1]` for used tickets',
    }),
    cursor: Type.String({
      description: 'Pass as `cursor`: `position.id` inside a first sync, a plain feed position after it',
    }),
    has_more: Type.Boolean(),
    ...FeedLists,
  },
  { description: 'The compact encoding (`format=columns`)' },
)

const FeedPage = Type.Object({
  event_id: Type.Integer(),
  ...FeedLists,
  key_ids: Type.Array(Type.String(), {
    description: 'Key ids of /.well-known/jwks.json; fetch it again when one is unknown',
  }),
  tickets: Type.Array(FeedEntry),
  cursor: Type.String({ description: 'Pass as `cursor` for the changes after this page' }),
  has_more: Type.Boolean({ description: 'Another page follows at once' }),
})

function sendSnapshotPage(reply: FastifyReply, page: SnapshotPage) {
  reply.header('content-type', 'application/json; charset=utf-8').header('vary', 'accept-encoding')
  if (page.encoding) reply.header('content-encoding', page.encoding)
  // Its buffer is read into again for another page once this answer was handed to the socket; an
  // answer cut off before that leaves it to the garbage collector.
  reply.raw.once('finish', page.release)
  // Sent as it is (a Buffer is not serialised again); the schema above describes what it holds.
  return reply.send(page.body)
}

export const edgeRoutes: FastifyPluginAsyncTypebox<EdgeRoutesDeps> = async (app, deps) => {
  const { keys } = deps
  const edge = new EdgeService(deps)
  app.addHook('onClose', () => edge.close())

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
        // offline
        doc: {
          operationId: 'getEdgeKeySet',
          returns: 'The JWK Set of the edge keys, current key first',
          response: {
            keys: [
              {
                kty: 'OKP',
                crv: 'Ed25519',
                x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo',
                kid: 'Vq3n8dXk2Lw',
                alg: 'EdDSA',
                use: 'sig',
              },
            ],
          },
        },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'public, max-age=300')
      // Public keys, meant to be read from anywhere; browser scanners also probe this address to tell a
      // CORS refusal from a network failure (a no-cors request that same-origin would block).
      reply.header('cross-origin-resource-policy', 'cross-origin')
      return keys.jwks as { keys: Static<typeof Jwk>[] }
    },
  )

  app.get(
    '/events/:event_id/scan-sync',
    {
      // Its requests are counted by none of the others: a first sync's pages wait for the other routes'
      // requests, not for each other (nor for deltas).
      config: { ...perMinute(SCAN_SYNC_RATE_LIMIT), yieldsToRequests: true },
      ...protect(deps.tokens, { types: ['access', 'offline'] }),
      schema: {
        tags: ['offline'],
        summary: "The scanner sync feed: the event's tickets changed since a cursor",
        description:
          'Needs `ticket:scan` or `sync:download` for the event. Without `cursor`: every ticket of the event ' +
          '(a full sync, paginated; in the object form only for an event of at most SCAN_SYNC_JSON_MAX_TICKETS ' +
          'tickets, 413 `full_sync_too_large` above: take it with `format=columns`); with it: the tickets ' +
          'changed since, each once with its latest state. ' +
          'Follow `cursor` while `has_more`; keep the last `cursor` for the next sync.',
        security: [{ OAuth2PasswordBearer: [] }],
        params: Type.Object({ event_id: Type.Integer({ minimum: 1 }) }, { additionalProperties: false }),
        querystring: Type.Object(
          {
            cursor: Type.Optional(Type.String({ pattern: '^\\d{1,15}(\\.\\d{1,15})?$' })),
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: FEED_PAGE, default: FEED_PAGE })),
            format: Type.Optional(
              Type.Literal('columns', {
                description:
                  'The compact encoding: about 40 bytes a ticket before compression, a first sync shared by every scanner (a snapshot of the event, compressed once)',
              }),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Union([FeedPage, ColumnsPage]), ...errorResponses(401, 403, 404, 413, 429) },
        doc: {
          operationId: 'syncScannerFeed',
          errors: {
            ...DEVICE_KEY_REQUIRED,
            413: [
              {
                code: 'full_sync_too_large',
                when: 'a sync of the object form without a cursor (or from 0) of an event above SCAN_SYNC_JSON_MAX_TICKETS tickets (100,000 by default): take the first sync with format=columns',
                detail:
                  'The event has more than 100000 tickets: take its first sync with format=columns (docs/offline.md)',
              },
            ],
          },
          returns: "A page of the event's ticket changes since the cursor",
          response: {
            event_id: 1,
            key_ids: ['Vq3n8dXk2Lw'],
            tickets: [
              {
                transfer_uid: TRANSFER_UID,
                ticket_uid: TICKET_UID,
                change: 'used',
                version: 1,
                digest: 'kR3v0Yq9Lw2mXb7Tn5Hc1A',
                used_timestamp: USED_LOCAL,
                used_at: USED_UTC,
                used_gate: 'North',
              },
              {
                transfer_uid: '5f1c0e7a9b2d4c6e8f0a1b3c5d7e9f01',
                ticket_uid: TICKET_UID,
                change: 'revoked',
                version: 2,
                digest: 'Zp8sQ1dN4fG6hJ0kL2mB9w',
                used_timestamp: null,
                used_at: null,
                used_gate: null,
              },
            ],
            cursor: '1042',
            has_more: false,
          },
        },
      },
    },
    async (request, reply) => {
      // The service's time: scanners correct their clocks by it (the window of use-batch is its).
      reply.header('date', new Date(deps.clock.now()).toUTCString())
      const claims = claimsOf(request)
      const eventId = request.params.event_id
      if (isKeylessDevice(claims)) throw new ForbiddenError(KEYLESS_DEVICE, 'device_key_required')
      if (!hasScope(claims, eventId, 'ticket:scan') && !hasScope(claims, eventId, 'sync:download'))
        throw new ForbiddenError('This token lacks ticket:scan and sync:download for the event')
      const { cursor, limit = FEED_PAGE, format } = request.query
      if (cursor === undefined)
        edge.countFirstSync(
          claims.device_id != null ? `device:${claims.device_id}` : `${claims.role}:${claims.sub}`,
        )
      if (format !== 'columns') {
        if (cursor?.includes('.'))
          throw new ValidationFailed([
            {
              loc: ['query', 'cursor'],
              msg: 'Value error, a first-sync cursor belongs to format=columns',
              type: 'value_error',
              input: cursor,
            },
          ])
        return edge.feed(eventId, Number(cursor ?? 0), limit)
      }
      // A first sync's page (about 200 KB, four scanners taking them back to back) is read and sent
      // in its turn, once built: while the instance answers no other request, and no other page is
      // being sent. A ticket use at the gate queues behind one page at most.
      let turned = false
      const turn = async () => {
        if (turned) return
        turned = true
        const done = await deps.precedence.turn(PAGE_YIELDS_AT_MOST_MS)
        // The turn ends with the answer (sent, or cut off: perhaps while it waited).
        if (reply.raw.closed) done()
        else reply.raw.once('close', done)
      }
      const page = await edge.columns(
        eventId,
        cursor,
        limit,
        acceptedEncoding(request.headers['accept-encoding']),
        turn,
      )
      if (!('body' in page)) return page
      // A snapshot page, encoded and compressed once for every scanner.
      return sendSnapshotPage(reply, page)
    },
  )

  const write = partnerAuth(deps, 'write')
  app.post(
    '/companies/transfer/:company_ticket_id/reissue',
    {
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
        doc: {
          operationId: 'reissueTicketCode',
          returns: 'The transfer has a new ticket code; the previous one is revoked',
          response: {
            transfer_uid: TRANSFER_UID,
            company_ticket_id: 'order-1042-1',
            code_version: 2,
            ticket_code: TICKET_CODE,
          },
          errors: {
            409: [
              {
                code: 'already_used',
                when: 'the ticket was used: a used ticket keeps its code',
                detail: 'A used ticket keeps its code',
                extra: { used_timestamp: USED_LOCAL, used_at: USED_UTC },
              },
              {
                code: 'concurrent_change',
                when: 'the ticket was used or re-issued while this request ran',
                detail: 'The ticket was used or re-issued meanwhile',
              },
            ],
          },
        },
      },
    },
    async (request) => edge.reissue(partnerOf(request), request.params.company_ticket_id),
  )
}
