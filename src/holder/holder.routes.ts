import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { qrDataUrl } from '../edge/qr.js'
import type { TicketCodes } from '../edge/ticket-codes.js'
import { TicketCode } from '../partner/partner.schemas.js'
import { PARTNER_RATE_LIMIT } from '../partner/partner-auth.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { ConflictError, NotFoundError } from '../platform/errors.js'
import { fromMinorUnits } from '../platform/formats.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { TokenService } from '../tokens/token.service.js'
import { claimLink, findLinkByToken, ticketsOfConsumer, ticketsOfLink, walletsOf } from './holder.store.js'

export interface HolderRoutesDeps {
  db: Db
  clock: Clock
  tokens: TokenService
  codes: TicketCodes
}

/** decisions.md §3: holder endpoints share the partner limit. */
const HOLDER_RATE_LIMIT = PARTNER_RATE_LIMIT
const bearer = [{ OAuth2PasswordBearer: [] }]

const Ticket = Type.Object({
  transfer_uid: Type.String(),
  event_uid: Type.String(),
  event_name: Type.String(),
  ticket_uid: Type.String(),
  name: Type.String(),
  ticket_date: Type.String(),
  status: Type.Union([Type.Literal('TRANSFERRED'), Type.Literal('CLAIMED'), Type.Literal('USED')]),
  used_timestamp: Type.Union([Type.String(), Type.Null()]),
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

type TicketRow = Awaited<ReturnType<typeof ticketsOfLink>>[number]
const ticketView =
  (codes: TicketCodes) =>
  ({ code_body, ...t }: TicketRow) => ({
    ...t,
    status: t.status as 'TRANSFERRED' | 'CLAIMED' | 'USED',
    balance: fromMinorUnits(t.balance),
    promo_balance: fromMinorUnits(t.promo_balance),
    ticket_code: codes.render(code_body),
  })

export const holderRoutes: FastifyPluginAsyncTypebox<HolderRoutesDeps> = async (app, deps) => {
  const { db, clock } = deps
  const consumer = protect(deps.tokens, { roles: ['consumer'] })
  const view = ticketView(deps.codes)

  async function linkView(token: string) {
    const link = await findLinkByToken(db, token)
    if (!link) throw new NotFoundError('Unknown or expired link')
    return {
      link,
      view: {
        event_uid: link.event_uid,
        event_name: link.event_name,
        email: link.email,
        claimed: link.claimed_at !== null,
        tickets: await Promise.all(
          (await ticketsOfLink(db, link.id))
            .map(view)
            .map(async (t) => (t.ticket_code ? { ...t, ticket_qr: await qrDataUrl(t.ticket_code) } : t)),
        ),
      },
    }
  }

  app.get(
    '/holder/links/:token',
    {
      config: perMinute(HOLDER_RATE_LIMIT),
      schema: {
        tags: ['holder'],
        summary: 'The event and tickets of a claim link (from the transfer e-mail)',
        params: TokenParams,
        response: { 200: LinkView, ...errorResponses(404) },
      },
    },
    async (request) => {
      return (await linkView(request.params.token)).view
    },
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
      },
    },
    async (request) => {
      const customerId = Number(claimsOf(request).sub)
      const link = await findLinkByToken(db, request.params.token)
      if (!link) throw new NotFoundError('Unknown or expired link')
      if (!(await claimLink(db, link.id, link.event_id, customerId, clock.now())))
        throw new ConflictError('This link was already claimed by another account', 'already_claimed')
      return (await linkView(request.params.token)).view
    },
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
      },
    },
    async (request) => ({
      tickets: (await ticketsOfConsumer(db, Number(claimsOf(request).sub))).map(view),
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
      },
    },
    async (request) => ({
      wallets: (await walletsOf(db, Number(claimsOf(request).sub))).map((w) => ({
        event_uid: w.event_uid,
        event_name: w.event_name,
        balance: fromMinorUnits(w.balance),
        promo_balance: fromMinorUnits(w.promo_balance),
        updated_at: new Date(w.updated_at).toISOString(),
      })),
    }),
  )
}
