import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { TicketCode } from '../partner/partner.schemas.js'
import { PARTNER_ADDRESS_RATE_LIMIT } from '../partner/partner-auth.js'
import { AT, EVENT } from '../platform/openapi-examples.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import { holderTicket, linkView } from './holder.openapi.js'
import { HolderService, type HolderServiceDeps } from './holder.service.js'

export interface HolderRoutesDeps extends HolderServiceDeps {
  tokens: TokenService
}

/** docs/specification.md: holder endpoints share the partner limit. */
const HOLDER_RATE_LIMIT = PARTNER_ADDRESS_RATE_LIMIT
const bearer = [{ OAuth2PasswordBearer: [] }]

const Ticket = Type.Object({
  transfer_uid: Type.String(),
  event_uid: Type.String(),
  event_name: Type.String(),
  ticket_uid: Type.String(),
  name: Type.String(),
  ticket_date: Type.String(),
  status: Type.Union([Type.Literal('TRANSFERRED'), Type.Literal('CLAIMED'), Type.Literal('USED')]),
  used_timestamp: Type.Union([Type.String(), Type.Null()], {
    description: "The event's local time of the use",
  }),
  used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'The same instant in UTC (ISO 8601 with Z)',
  }),
  event_timezone: Type.String({ description: "The event's IANA time zone" }),
  access_gate: Type.Union([Type.String(), Type.Null()]),
  seat_number: Type.Union([Type.String(), Type.Null()]),
  balance: Type.Number(),
  promo_balance: Type.Number(),
  ticket_code: TicketCode,
  ticket_qr: Type.Optional(
    Type.String({ description: 'The QR image of ticket_code as a PNG data URL, for the link page' }),
  ),
})

const LinkView = Type.Object({
  event_uid: Type.String(),
  event_name: Type.String(),
  email: Type.String(),
  claimed: Type.Boolean(),
  tickets: Type.Array(Ticket),
})

const Wallet = Type.Object({
  event_uid: Type.String(),
  event_name: Type.String(),
  balance: Type.Number(),
  promo_balance: Type.Number(),
  updated_at: Type.String({ format: 'date-time' }),
})

// Claim tokens are 32 random bytes in base64url: 43 characters.
const TokenParams = Type.Object(
  { token: Type.String({ minLength: 43, maxLength: 43, pattern: '^[A-Za-z0-9_-]+$' }) },
  { additionalProperties: false },
)

export const holderRoutes: FastifyPluginAsyncTypebox<HolderRoutesDeps> = async (app, deps) => {
  const holder = new HolderService(deps)
  const consumer = protect(deps.tokens, { roles: ['consumer'] })

  app.get(
    '/holder/links/:token',
    {
      config: perMinute(HOLDER_RATE_LIMIT),
      schema: {
        tags: ['holder'],
        summary: 'The event and tickets of a claim link (from the transfer e-mail)',
        description:
          'Until the link is claimed each ticket carries its code and QR image; once claimed, the tickets are shown with `ticket_code: null` and no QR image (the account reads them at GET /consumers/me/tickets).',
        params: TokenParams,
        response: { 200: LinkView, ...errorResponses(404) },
        doc: {
          operationId: 'getClaimLink',
          returns: "The link's event and tickets",
          response: { ...linkView, claimed: false, tickets: [{ ...holderTicket, status: 'TRANSFERRED' }] },
        },
      },
    },
    async (request) => holder.linkView(request.params.token),
  )

  app.post(
    '/holder/links/:token/claim',
    {
      config: perMinute(HOLDER_RATE_LIMIT),
      ...consumer,
      schema: {
        tags: ['holder'],
        summary: "Move a link's tickets and balances into the signed-in consumer's account",
        description: 'Claiming again as the same consumer answers 200; another consumer gets 409.',
        security: bearer,
        params: TokenParams,
        response: { 200: LinkView, ...errorResponses(401, 403, 404, 409) },
        doc: {
          operationId: 'claimLink',
          returns: "The link's tickets, now the consumer's",
          response: linkView,
          errors: {
            409: [
              {
                code: 'already_claimed',
                when: 'another consumer claimed the link',
                detail: 'This link was already claimed by another account',
              },
            ],
          },
        },
      },
    },
    async (request) => holder.claim(request.params.token, Number(claimsOf(request).sub)),
  )

  app.get(
    '/consumers/me/tickets',
    {
      config: perMinute(HOLDER_RATE_LIMIT),
      ...consumer,
      schema: {
        tags: ['consumers'],
        summary: "The signed-in consumer's tickets",
        security: bearer,
        response: { 200: Type.Object({ tickets: Type.Array(Ticket) }), ...errorResponses(401, 403) },
        doc: {
          operationId: 'listMyTickets',
          returns: "The consumer's tickets",
          response: { tickets: [holderTicket] },
        },
      },
    },
    async (request) => ({
      tickets: await holder.ticketsOf(Number(claimsOf(request).sub)),
    }),
  )

  app.get(
    '/consumers/me/wallets',
    {
      config: perMinute(HOLDER_RATE_LIMIT),
      ...consumer,
      schema: {
        tags: ['consumers'],
        summary: "The signed-in consumer's balances, per event",
        security: bearer,
        response: { 200: Type.Object({ wallets: Type.Array(Wallet) }), ...errorResponses(401, 403) },
        doc: {
          operationId: 'listMyWallets',
          returns: "The consumer's balances",
          response: {
            wallets: [
              {
                event_uid: EVENT,
                event_name: 'Summer Festival 2026',
                balance: 20,
                promo_balance: 5,
                updated_at: AT,
              },
            ],
          },
        },
      },
    },
    async (request) => ({
      wallets: await holder.walletsOf(Number(claimsOf(request).sub)),
    }),
  )
}
