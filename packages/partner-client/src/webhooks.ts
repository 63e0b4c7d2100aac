import type { IncomingMessage, ServerResponse } from 'node:http'
import { Webhook, WebhookVerificationError } from 'standardwebhooks'
import type { operations } from './generated/openapi.js'

/**
 * The body of a ticket use notification (the `payload` of a delivery), generated from the OpenAPI
 * document's `webhooks.ticketUsed`: `used_timestamp` in the event's local time, `used_at` in UTC.
 */
export type UseNotification = operations['ticketUsed']['requestBody']['content']['application/json']

export interface VerifiedWebhook<T = UseNotification> {
  /** The `webhook-id` header: the same on every attempt and resend of one notification. */
  id: string
  /** When this attempt was signed. */
  timestamp: Date
  payload: T
}

export interface WebhookReceiverOptions {
  /** The `whsec_...` secret that PUT /companies/webhook answered. */
  secret: string
  /** How far the signed time may be from now, in seconds; at most 300 (the library's own window). */
  toleranceSeconds?: number
  /** Milliseconds since the epoch (tests move it). */
  now?: () => number
  /** How many recent messages the default in-memory replay store remembers. Default 10,000. */
  remember?: number
  /**
   * Where accepted messages are remembered, to refuse a replay. Default: in this process's memory
   * (`memoryReplayStore`), which a restarted receiver, or a second one behind a load balancer, does
   * not share: give every instance one shared store (Redis, SQL: see docs/partner-api.md) so that a
   * replay is refused whichever instance it reaches. A store answering a promise needs `verifyAsync`.
   */
  replayStore?: ReplayStore
}

/**
 * Remembers accepted messages. `remember(key, ttlMs)` records `key` unless it is already recorded and
 * answers whether it was new (false: a replay). A key may be forgotten after `ttlMs` (the signed time
 * is then outside the tolerance, which refuses the message anyway). It must be atomic across the
 * receivers that share it: Redis `SET key 1 NX PX ttl`, or an INSERT into a table whose primary key is
 * the key (`ON CONFLICT DO NOTHING`, new when one row was inserted).
 */
export interface ReplayStore {
  remember(key: string, ttlMs: number): boolean | Promise<boolean>
}

/** The default replay store: this process's memory, at most `max` keys (the oldest go first). */
export function memoryReplayStore(max = 10_000, now: () => number = Date.now): ReplayStore {
  /** key → when it may be forgotten (ms), oldest first. */
  const seen = new Map<string, number>()
  return {
    remember(key, ttlMs) {
      const at = now()
      for (const [k, until] of seen) {
        if (until > at && seen.size < max) break
        seen.delete(k)
      }
      if (seen.has(key)) return false
      seen.set(key, at + ttlMs)
      return true
    },
  }
}

/** `webhook-timestamp`: whole seconds, digits only; `0<ts>`, `+<ts>`, `<ts>x` are refused. */
const TIMESTAMP = /^\d{1,12}$/

export { WebhookVerificationError }

/** The same signed request again: someone replayed a captured delivery. */
export class WebhookReplayError extends WebhookVerificationError {
  constructor() {
    super('Message already received (replay)')
    // The library's error classes set their own prototype, which would hide this subclass.
    Object.setPrototypeOf(this, WebhookReplayError.prototype)
    this.name = 'WebhookReplayError'
  }
}

type Headers = Record<string, string | string[] | undefined> | globalThis.Headers

function header(headers: Headers, name: string): string {
  const v = headers instanceof globalThis.Headers ? headers.get(name) : headers[name]
  return (Array.isArray(v) ? v[0] : v) ?? ''
}

/**
 * Verifies deliveries of wristband's webhooks: the Standard Webhooks signature (the official
 * `standardwebhooks` library), the signed time within the tolerance, and no second acceptance of the
 * same signed request. A resend of a notification (same `webhook-id`, new signature and time) is
 * accepted: deduplicate by `id` if a notification must be handled once.
 */
export class WebhookReceiver {
  private readonly webhook: Webhook
  private readonly tolerance: number
  private readonly now: () => number
  private readonly store: ReplayStore

  constructor(opts: WebhookReceiverOptions) {
    this.webhook = new Webhook(opts.secret)
    this.tolerance = Math.min(opts.toleranceSeconds ?? 300, 300)
    this.now = opts.now ?? Date.now
    this.store = opts.replayStore ?? memoryReplayStore(opts.remember ?? 10_000, this.now)
  }

  /**
   * The signature and the time checked; the key to remember: the message id with the signed time as
   * a number, so no other spelling of the same time (which the signature covers as parsed) passes.
   */
  private check<T>(rawBody: string | Buffer, headers: Headers) {
    const h = {
      'webhook-id': header(headers, 'webhook-id'),
      'webhook-timestamp': header(headers, 'webhook-timestamp'),
      'webhook-signature': header(headers, 'webhook-signature'),
    }
    if (!TIMESTAMP.test(h['webhook-timestamp']))
      throw new WebhookVerificationError('Invalid webhook-timestamp: whole seconds, digits only')
    const payload = this.webhook.verify(rawBody, h) as T
    const signedAt = Number(h['webhook-timestamp']) * 1000
    if (Math.abs(this.now() - signedAt) > this.tolerance * 1000)
      throw new WebhookVerificationError('Message timestamp outside the tolerance')
    const verified: VerifiedWebhook<T> = { id: h['webhook-id'], timestamp: new Date(signedAt), payload }
    // Remembered until the signed time is out of the tolerance (and a little longer, for clock skew).
    return { verified, key: `${h['webhook-id']} ${signedAt / 1000}`, ttlMs: 2 * this.tolerance * 1000 }
  }

  /**
   * The verified notification, or a thrown WebhookVerificationError (bad signature or timestamp,
   * stale, replay). For a replay store that answers synchronously (the default); see `verifyAsync`.
   */
  verify<T = UseNotification>(rawBody: string | Buffer, headers: Headers): VerifiedWebhook<T> {
    const { verified, key, ttlMs } = this.check<T>(rawBody, headers)
    const fresh = this.store.remember(key, ttlMs)
    if (typeof fresh !== 'boolean')
      throw new TypeError('This replay store answers a promise: use verifyAsync')
    if (!fresh) throw new WebhookReplayError()
    return verified
  }

  /** `verify` with any replay store (a shared Redis or SQL one answers a promise). */
  async verifyAsync<T = UseNotification>(
    rawBody: string | Buffer,
    headers: Headers,
  ): Promise<VerifiedWebhook<T>> {
    const { verified, key, ttlMs } = this.check<T>(rawBody, headers)
    if (!(await this.store.remember(key, ttlMs))) throw new WebhookReplayError()
    return verified
  }

  /**
   * A node:http request listener: answers 204 after `onNotification` resolves, 400 to a request that
   * fails verification, and 500 when `onNotification` throws (so the service retries the delivery).
   */
  nodeListener<T = UseNotification>(
    onNotification: (webhook: VerifiedWebhook<T>) => unknown,
  ): (req: IncomingMessage, res: ServerResponse) => void {
    return (req, res) => {
      const chunks: Buffer[] = []
      let size = 0
      req.on('data', (c: Buffer) => {
        size += c.length
        if (size <= 1024 * 1024) chunks.push(c)
      })
      req.on('end', async () => {
        let verified: VerifiedWebhook<T>
        try {
          if (size > 1024 * 1024) throw new WebhookVerificationError('Body too large')
          verified = await this.verifyAsync<T>(Buffer.concat(chunks), req.headers)
        } catch (err) {
          res.writeHead(400, { 'content-type': 'text/plain' }).end((err as Error).message)
          return
        }
        try {
          await onNotification(verified)
          res.writeHead(204).end()
        } catch {
          res.writeHead(500, { 'content-type': 'text/plain' }).end('Handler failed')
        }
      })
    }
  }
}
