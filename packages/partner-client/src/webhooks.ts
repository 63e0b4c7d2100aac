import type { IncomingMessage, ServerResponse } from 'node:http'
import { Webhook, WebhookVerificationError } from 'standardwebhooks'

/** The body of a ticket use notification (the `payload` of a delivery). */
export interface UseNotification {
  event_uid: string
  transfer_uid: string
  user_email: string
  company_ticket_id: string
  status: 'USED'
  used_timestamp: string
}

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
  /** How many recent (id, timestamp) pairs to remember to refuse a replay. Default 10,000. */
  remember?: number
}

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
  private readonly max: number
  /** `${id} ${timestamp}` → signed time in ms, oldest first. */
  private readonly seen = new Map<string, number>()

  constructor(opts: WebhookReceiverOptions) {
    this.webhook = new Webhook(opts.secret)
    this.tolerance = Math.min(opts.toleranceSeconds ?? 300, 300)
    this.now = opts.now ?? Date.now
    this.max = opts.remember ?? 10_000
  }

  /** The verified notification, or a thrown WebhookVerificationError (bad signature, stale, replay). */
  verify<T = UseNotification>(rawBody: string | Buffer, headers: Headers): VerifiedWebhook<T> {
    const h = {
      'webhook-id': header(headers, 'webhook-id'),
      'webhook-timestamp': header(headers, 'webhook-timestamp'),
      'webhook-signature': header(headers, 'webhook-signature'),
    }
    const payload = this.webhook.verify(rawBody, h) as T
    const signedAt = Number(h['webhook-timestamp']) * 1000
    const now = this.now()
    if (Math.abs(now - signedAt) > this.tolerance * 1000)
      throw new WebhookVerificationError('Message timestamp outside the tolerance')
    const key = `${h['webhook-id']} ${h['webhook-timestamp']}`
    if (this.seen.has(key)) throw new WebhookReplayError()
    // Forget what is past the tolerance (the time check refuses it anyway), and the oldest beyond the bound.
    for (const [seenKey, at] of this.seen) {
      if (now - at <= this.tolerance * 1000 && this.seen.size < this.max) break
      this.seen.delete(seenKey)
    }
    this.seen.set(key, signedAt)
    return { id: h['webhook-id'], timestamp: new Date(signedAt), payload }
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
          verified = this.verify<T>(Buffer.concat(chunks), req.headers)
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
