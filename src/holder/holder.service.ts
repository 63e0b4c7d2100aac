import { qrDataUrl } from '../edge/qr.js'
import type { TicketCodes } from '../edge/ticket-codes.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { ConflictError, NotFoundError } from '../platform/errors.js'
import { fromMinorUnits } from '../platform/formats.js'
import { ticketsOfConsumer, ticketsOfLink } from '../transfers/transfers.store.js'
import { claimLink, findLinkByToken, walletsOf } from './holder.store.js'

export interface HolderServiceDeps {
  db: Db
  clock: Clock
  codes: TicketCodes
}

type TicketRow = Awaited<ReturnType<typeof ticketsOfLink>>[number]

/** The ticket holder: claim links from the transfer e-mail, and the consumer's own tickets and wallets. */
export class HolderService {
  constructor(private readonly deps: HolderServiceDeps) {}

  private ticketView = ({ code_body, used_at, ...t }: TicketRow) => ({
    ...t,
    used_at: used_at === null ? null : new Date(Number(used_at)).toISOString(),
    status: t.status as 'TRANSFERRED' | 'CLAIMED' | 'USED',
    balance: fromMinorUnits(t.balance),
    promo_balance: fromMinorUnits(t.promo_balance),
    ticket_code: this.deps.codes.render(code_body),
  })

  /**
   * The event and tickets of a claim link. Until it is claimed the link is the holder's only way in, so
   * each ticket carries its code and QR image. Once claimed, the tickets are an account's: the link, a
   * bearer secret in an e-mail that may have been forwarded, shows them without codes (the account
   * reads them at GET /consumers/me/tickets), so a re-issue after a leak is not undone by the e-mail.
   */
  async linkView(token: string) {
    const link = await findLinkByToken(this.deps.db, token)
    if (!link) throw new NotFoundError('Unknown or expired link')
    return this.view(link, link.claimed_at === null)
  }

  /** Moves a link's tickets and balances to the consumer; claiming again as the same consumer is no change. */
  async claim(token: string, customerId: number) {
    const { db, clock } = this.deps
    const link = await findLinkByToken(db, token)
    if (!link) throw new NotFoundError('Unknown or expired link')
    // The claim, the tickets and the wallet's balances move together (holder.store.ts).
    const now = clock.now()
    if (!(await db.transaction().execute((tx) => claimLink(tx, link.id, link.event_id, customerId, now))))
      throw new ConflictError('This link was already claimed by another account', 'already_claimed')
    // The answer goes to the account that now holds the tickets: with their codes.
    return this.view({ ...link, claimed_at: link.claimed_at ?? clock.now() }, true)
  }

  private async view(link: NonNullable<Awaited<ReturnType<typeof findLinkByToken>>>, withCodes: boolean) {
    const tickets = (await ticketsOfLink(this.deps.db, link.id)).map(this.ticketView)
    return {
      event_uid: link.event_uid,
      event_name: link.event_name,
      email: link.email,
      claimed: link.claimed_at !== null,
      tickets: tickets.map((t) =>
        !withCodes
          ? { ...t, ticket_code: null }
          : t.ticket_code
            ? { ...t, ticket_qr: qrDataUrl(t.ticket_code) }
            : t,
      ),
    }
  }

  async ticketsOf(customerId: number) {
    return (await ticketsOfConsumer(this.deps.db, customerId)).map(this.ticketView)
  }

  async walletsOf(customerId: number) {
    return (await walletsOf(this.deps.db, customerId)).map((w) => ({
      event_uid: w.event_uid,
      event_name: w.event_name,
      balance: fromMinorUnits(w.balance),
      promo_balance: fromMinorUnits(w.promo_balance),
      updated_at: new Date(w.updated_at).toISOString(),
    }))
  }
}
