import { listPartners } from '../api-keys/api-keys.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { ValidationFailed } from '../platform/errors.js'
import { ForbiddenDestinationError, type HttpClient } from '../platform/http-client.js'
import type { Sealer } from '../platform/keys.js'
import { newWebhookSecret } from './signing.js'
import {
  deleteWebhook,
  findDeliveryOfEvent,
  findWebhook,
  listDeliveries,
  type ReceiverOwner,
  resendDelivery,
  sealSecret,
  upsertWebhook,
} from './webhooks.store.js'

export interface WebhookDeliveriesDeps {
  db: Db
  clock: Clock
}

/**
 * A partner's receiver as it stands and its deliveries: what the partner API and the dashboard show.
 * Everything is per partner: a partner never reaches another partner's receiver or deliveries.
 */
export class WebhookDeliveries {
  constructor(protected readonly deps: WebhookDeliveriesDeps) {}

  receiverOf(partnerId: number) {
    return findWebhook(this.deps.db, partnerId)
  }

  /** The partner's deliveries, newest first, each with its attempts. */
  deliveries(partnerId: number, query: { limit: number; before?: number; status?: string }) {
    return listDeliveries(this.deps.db, partnerId, query)
  }

  /** The event's ticket partners (the dashboard shows one partner's deliveries at a time). */
  partnersOf(eventId: number) {
    return listPartners(this.deps.db, eventId)
  }

  /** The partner of one of the event's deliveries; undefined for an unknown or another event's delivery. */
  async partnerOfDelivery(eventId: number, deliveryId: number): Promise<number | undefined> {
    return (await findDeliveryOfEvent(this.deps.db, eventId, deliveryId))?.partner_id ?? undefined
  }

  /** Sends a delivery again now, with the same webhook-id (404 unknown, 409 no enabled receiver). */
  resend(partnerId: number, deliveryId: number): Promise<void> {
    return resendDelivery(this.deps.db, partnerId, deliveryId, this.deps.clock.now())
  }
}

export interface WebhookServiceDeps extends WebhookDeliveriesDeps {
  http: HttpClient
  /** Seals signing secrets at rest. */
  sealer: Sealer
}

/** The partner's management of its receiver, beside what the dashboard shows of it. */
export class WebhookService extends WebhookDeliveries {
  constructor(protected override readonly deps: WebhookServiceDeps) {
    super(deps)
  }

  /**
   * Registers (or replaces) the receiver with a new signing secret, answered once. An address that
   * does not resolve, or resolves to a loopback or private one, is a validation error of `url`.
   */
  async register(owner: ReceiverOwner, url: string) {
    const { db, clock, http, sealer } = this.deps
    try {
      await http.checkDestination(url)
    } catch (err) {
      const forbidden = err instanceof ForbiddenDestinationError
      throw new ValidationFailed([
        {
          loc: ['body', 'url'],
          msg: forbidden
            ? `Value error, ${(err as Error).message}; receivers on loopback or private addresses are refused`
            : 'Value error, the host name does not resolve',
          type: 'value_error',
          input: url,
        },
      ])
    }
    const secret = newWebhookSecret()
    const hook = await upsertWebhook(db, owner, url, sealSecret(sealer, owner.eventId, secret), clock.now())
    return { hook, secret }
  }

  /** False when the partner has no receiver. */
  remove(partnerId: number): Promise<boolean> {
    return deleteWebhook(this.deps.db, partnerId)
  }
}
