import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import type { HttpClient } from '../platform/http-client.js'
import { type JobHandler, RetryLater } from '../platform/jobs/jobs.js'
import type { Sealer } from '../platform/keys.js'
import { traced } from '../platform/tracing.js'
import { signatureHeaders } from './signing.js'
import {
  abandonDelivery,
  findDeliveryToSend,
  findWebhook,
  lastAttemptAt,
  needsResealing,
  openSecret,
  recordAttempt,
  resealSecret,
  type WebhookJobPayload,
} from './webhooks.store.js'

export interface WebhookDeliveryDeps {
  db: Db
  clock: Clock
  http: HttpClient
  /** WEBHOOK_RETRY_SCHEDULE: seconds before each retry */
  retrySchedule: readonly number[]
  /** Opens the sealed signing secrets. */
  sealer: Sealer
  /** Told the outcome of each attempt (the metrics): a retry comes after `failed`, none after `gave_up`. */
  onAttempt?: (outcome: 'delivered' | 'failed' | 'gave_up') => void
}

/** A receiver cannot push a retry further out than the longest step of our own schedule. */
const MAX_RETRY_AFTER_MS = 24 * 3600_000

/** Retry-After as seconds or as an HTTP date, in milliseconds from now; undefined when absent or bad. */
export function retryAfterMs(value: string | string[] | undefined, now: number): number | undefined {
  const v = Array.isArray(value) ? value[0] : value
  if (!v) return undefined
  const ms = /^\d+$/.test(v.trim()) ? Number(v.trim()) * 1000 : Date.parse(v) - now
  if (!Number.isFinite(ms)) return undefined
  return Math.min(Math.max(ms, 0), MAX_RETRY_AFTER_MS)
}

/**
 * One attempt to deliver a notification. Every attempt is recorded with its status, duration and the
 * first kilobyte of the answer. 2xx: delivered. 410: the receiver is gone, the webhook is disabled and
 * nothing more is sent. Anything else (other statuses, redirects, timeouts, refused connections,
 * refused addresses): retried on the schedule, or after the receiver's Retry-After.
 */
export function webhookDeliveryJob(deps: WebhookDeliveryDeps): JobHandler<WebhookJobPayload> {
  return {
    retrySchedule: deps.retrySchedule,
    async run({ deliveryId }, { attempt }) {
      const { db, clock } = deps
      const delivery = await findDeliveryToSend(db, deliveryId)
      if (!delivery || delivery.status === 'delivered') return
      const hook = delivery.partner_id !== null ? await findWebhook(db, delivery.partner_id) : undefined
      if (!hook || hook.disabled_at !== null) {
        await abandonDelivery(db, deliveryId)
        return
      }

      const secret = openSecret(deps.sealer, hook.event_id, hook.secret)
      // A plain secret (stored before sealing) or one sealed under a previous JWT secret is sealed afresh.
      if (secret !== null && needsResealing(deps.sealer, hook.secret))
        await resealSecret(db, deps.sealer, hook)

      // Each attempt is signed at a later second than the one before. Receivers key a message by its id
      // and signed second to refuse replays, and the signature is a function of id, second and body: a
      // resend within the second of the previous attempt would be byte for byte that attempt, a replay.
      // The attempt is recorded at the second it was signed at (at most a second or two ahead).
      const last = await lastAttemptAt(db, deliveryId)
      const now0 = clock.now()
      const signedAt = Math.max(Math.floor(now0 / 1000), last === undefined ? 0 : Math.floor(last / 1000) + 1)
      const startedAt = Math.max(now0, signedAt * 1000)
      const started = performance.now()
      let status: number | null = null
      let error: string | null = null
      let body: string | null = null
      let retryAfter: number | undefined
      try {
        if (secret === null)
          throw new Error(
            'the signing secret was sealed under a JWT secret no longer configured; register the webhook again',
          )
        const res = await traced(
          'webhook.deliver',
          {
            'webhook.delivery_id': deliveryId,
            'webhook.attempt': attempt,
            'webhook.partner_id': hook.partner_id ?? 0,
          },
          () =>
            deps.http.post(hook.url, {
              headers: signatureHeaders(secret, delivery.uid, signedAt, delivery.payload),
              body: delivery.payload,
            }),
        )
        status = res.status
        body = res.body
        retryAfter = retryAfterMs(res.headers['retry-after'], clock.now())
      } catch (err) {
        const e = err as Error & { code?: string; cause?: { code?: string; message?: string } }
        error = [e.code ?? e.cause?.code, e.cause?.message ?? e.message]
          .filter(Boolean)
          .join(': ')
          .slice(0, 500)
      }
      const duration = Math.round(performance.now() - started)

      const now = clock.now()
      const ok = status !== null && status >= 200 && status < 300
      const gone = status === 410
      const lastAttempt = attempt > deps.retrySchedule.length
      const delay = retryAfter ?? (deps.retrySchedule[attempt - 1] ?? 0) * 1000
      const outcome = ok ? 'delivered' : gone || lastAttempt ? 'failed' : 'pending'
      // The attempt, the delivery's state and a disabled receiver commit together.
      await db.transaction().execute((tx) =>
        recordAttempt(
          tx,
          {
            delivery_id: deliveryId,
            attempted_at: startedAt,
            url: hook.url,
            status_code: status,
            duration_ms: duration,
            error,
            response_body: body,
          },
          {
            status: outcome,
            delivered_at: ok ? now : null,
            next_attempt_at: outcome === 'pending' ? now + delay : null,
          },
          gone ? { webhookId: hook.id, reason: 'receiver answered 410 Gone', now } : undefined,
        ),
      )
      deps.onAttempt?.(ok ? 'delivered' : outcome === 'failed' ? 'gave_up' : 'failed')
      if (ok || gone) return
      const reason = error ?? `receiver answered ${status}`
      if (retryAfter !== undefined && !lastAttempt) throw new RetryLater(retryAfter, reason)
      throw new Error(reason)
    },
  }
}
