import { listPartners } from '../api-keys/api-keys.store.js'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { type PruneCursor, type Pruned, pruned } from '../platform/db/prune.js'
import { ConflictError, NotFoundError, ValidationFailed } from '../platform/errors.js'
import { ForbiddenDestinationError, type HttpClient } from '../platform/http-client.js'
import type { Sealer } from '../platform/keys.js'
import { newWebhookSecret } from './signing.js'
import {
  deleteFinishedDeliveries,
  deleteWebhook,
  findDelivery,
  findDeliveryOfEvent,
  findWebhook,
  finishedDeliveriesBefore,
  listDeliveries,
  type ReceiverOwner,
  redeliver,
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

  /**
   * A manual resend (the partner API's retry and the dashboard's Resend button): the partner's delivery
   * goes out again now with the same webhook-id, provided the partner's receiver is enabled (409
   * otherwise). Another partner's delivery is "No such delivery" (404), as an unknown one.
   */
  async resend(partnerId: number, deliveryId: number): Promise<void> {
    const { db, clock } = this.deps
    const delivery = await findDelivery(db, partnerId, deliveryId)
    if (!delivery) throw new NotFoundError('No such delivery')
    const hook = await findWebhook(db, partnerId)
    if (!hook || hook.disabled_at !== null)
      throw new ConflictError(
        'No enabled webhook: register the receiver again with PUT /companies/webhook',
        'webhook_disabled',
      )
    const now = clock.now()
    // The delivery's new state and its job commit together.
    await db.transaction().execute((tx) => redeliver(tx, delivery.id, now))
  }
}

/**
 * Deletes up to `limit` deliveries created before `before` that are finished (delivered or failed),
 * with their attempts (retention): found by one statement outside any transaction (with nothing due,
 * retention's pass is that one statement), deleted in one short transaction; pending ones stay whatever
 * their age. Returns how many.
 */
export async function pruneDeliveries(
  db: Db,
  before: number,
  limit: number,
  after?: PruneCursor,
): Promise<Pruned> {
  const rows = await finishedDeliveriesBefore(db, before, limit, after)
  if (rows.length === 0) return pruned([], limit)
  const ids = rows.map((r) => r.id)
  const deleted = await db.transaction().execute((tx) => deleteFinishedDeliveries(tx, ids))
  return pruned(
    rows.map((r) => [r.created_at, r.id] as const),
    limit,
    deleted,
  )
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
