import { type Insertable, sql } from 'kysely'
import type { Db } from '../platform/db/database.js'
import type { PruneCursor } from '../platform/db/prune.js'
import type { WebhookAttemptsTable } from '../platform/db/schema.js'
import { enqueue, runPendingNow } from '../platform/jobs/jobs.js'
import type { Sealer } from '../platform/keys.js'
import { randomToken } from '../platform/random.js'

export const WEBHOOK_JOB = 'webhook'

export interface WebhookJobPayload {
  deliveryId: number
}

/** A partner's receiver. */
export function findWebhook(db: Db, partnerId: number) {
  return db.selectFrom('webhooks').selectAll().where('partner_id', '=', partnerId).executeTakeFirst()
}

/**
 * Signing secrets are stored sealed (AES-256-GCM under a key derived from the JWT signing secret, as
 * the MFA secrets), bound to the webhook's event: a reader of the database cannot forge notifications.
 * Rows written before sealing hold the plain `whsec_…` form; they still work and are sealed on start
 * (`resealStoredSecrets`) or at their next delivery.
 */
const secretContext = (eventId: number) => `webhook-secret:${eventId}`
const isPlain = (stored: string) => stored.startsWith('whsec_')

export function sealSecret(sealer: Sealer, eventId: number, secret: string): string {
  return sealer.seal(secret, secretContext(eventId))
}

/** The secret of a stored value, sealed or plain; null when sealed under a retired signing secret. */
export function openSecret(sealer: Sealer, eventId: number, stored: string): string | null {
  return isPlain(stored) ? stored : sealer.open(stored, secretContext(eventId))
}

/** Whether a stored value should be written again: plain, or sealed under a previous signing secret. */
export function needsResealing(sealer: Sealer, stored: string): boolean {
  return isPlain(stored) || sealer.isStale(stored)
}

/** Replaces a stored secret by its sealed form, unless it was changed meanwhile. */
export async function resealSecret(
  db: Db,
  sealer: Sealer,
  hook: { id: number; event_id: number; secret: string },
) {
  const plain = openSecret(sealer, hook.event_id, hook.secret)
  if (plain === null) return
  await db
    .updateTable('webhooks')
    .set({ secret: sealSecret(sealer, hook.event_id, plain) })
    .where('id', '=', hook.id)
    .where('secret', '=', hook.secret)
    .execute()
}

/**
 * Seals again every secret stored in plain text (rows from before sealing) or under a previous
 * signing secret, so that after a rotation every secret opens under the new key before the old one
 * is removed. Returns how many were written.
 */
export async function resealStoredSecrets(db: Db, sealer: Sealer): Promise<number> {
  const hooks = await db.selectFrom('webhooks').select(['id', 'event_id', 'secret']).execute()
  const stale = hooks.filter((hook) => needsResealing(sealer, hook.secret))
  for (const hook of stale) await resealSecret(db, sealer, hook)
  return stale.length
}

/** Whose receiver: a partner of an event. */
export interface ReceiverOwner {
  eventId: number
  partnerId: number
}

/**
 * Registers (or replaces) the partner's receiver with a new secret (given sealed), enabled again if it
 * was disabled. Another partner's receiver is never touched.
 */
export async function upsertWebhook(db: Db, owner: ReceiverOwner, url: string, secret: string, now: number) {
  return db
    .insertInto('webhooks')
    .values({
      event_id: owner.eventId,
      partner_id: owner.partnerId,
      url,
      secret,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) =>
      oc
        .column('partner_id')
        .doUpdateSet({ url, secret, disabled_at: null, disabled_reason: null, updated_at: now }),
    )
    .returningAll()
    .executeTakeFirstOrThrow()
}

export async function deleteWebhook(db: Db, partnerId: number): Promise<boolean> {
  const r = await db.deleteFrom('webhooks').where('partner_id', '=', partnerId).executeTakeFirst()
  return Number(r.numDeletedRows) > 0
}

export async function disableWebhook(db: Db, id: number, reason: string, now: number) {
  await db
    .updateTable('webhooks')
    .set({ disabled_at: now, disabled_reason: reason, updated_at: now })
    .where('id', '=', id)
    .execute()
}

/**
 * The outbox write: a delivery and its job, in the caller's transaction, when the partner (the one
 * that transferred the ticket) has an enabled receiver. Returns whether one was written.
 */
export async function queueNotification(
  tx: Db,
  now: number,
  owner: ReceiverOwner,
  transferId: number | null,
  payload: Record<string, unknown>,
): Promise<boolean> {
  const hook = await tx
    .selectFrom('webhooks')
    .select('id')
    .where('partner_id', '=', owner.partnerId)
    .where('disabled_at', 'is', null)
    .executeTakeFirst()
  if (!hook) return false
  const d = await tx
    .insertInto('webhook_deliveries')
    .values({
      uid: `msg_${randomToken(18)}`,
      event_id: owner.eventId,
      partner_id: owner.partnerId,
      transfer_id: transferId,
      payload: JSON.stringify(payload),
      status: 'pending',
      next_attempt_at: now,
      created_at: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  await enqueue(tx, now, {
    kind: WEBHOOK_JOB,
    payload: { deliveryId: d.id } satisfies WebhookJobPayload,
    dedupeKey: `webhook:${d.id}`,
  })
  return true
}

/**
 * Schedules another attempt of a delivery now, in the caller's transaction: a pending job is moved
 * forward, otherwise (delivered or given up) a new job starts a fresh round of retries. The webhook-id
 * stays the same.
 */
export async function redeliver(tx: Db, deliveryId: number, now: number): Promise<void> {
  await tx
    .updateTable('webhook_deliveries')
    .set({ status: 'pending', next_attempt_at: now })
    .where('id', '=', deliveryId)
    .execute()
  const queued = await enqueue(tx, now, {
    kind: WEBHOOK_JOB,
    payload: { deliveryId } satisfies WebhookJobPayload,
    dedupeKey: `webhook:${deliveryId}`,
  })
  if (!queued) await runPendingNow(tx, `webhook:${deliveryId}`, now)
}

/** A partner's deliveries, newest first, each with its attempts. */
export async function listDeliveries(
  db: Db,
  partnerId: number,
  opts: { limit: number; before?: number; status?: string },
) {
  let q = db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('partner_id', '=', partnerId)
    .orderBy('id', 'desc')
    .limit(opts.limit)
  if (opts.before !== undefined) q = q.where('id', '<', opts.before)
  if (opts.status !== undefined) q = q.where('status', '=', opts.status)
  const deliveries = await q.execute()
  const ids = deliveries.map((d) => d.id)
  const attempts = ids.length
    ? await db
        .selectFrom('webhook_attempts')
        .selectAll()
        .where('delivery_id', 'in', ids)
        .orderBy('id')
        .execute()
    : []
  return deliveries.map((d) => ({ ...d, attempts_log: attempts.filter((a) => a.delivery_id === d.id) }))
}

export function findDelivery(db: Db, partnerId: number, id: number) {
  return db
    .selectFrom('webhook_deliveries')
    .select(['id', 'status'])
    .where('partner_id', '=', partnerId)
    .where('id', '=', id)
    .executeTakeFirst()
}

/** One of an event's deliveries with its partner (the dashboard's Resend, which names the event). */
export function findDeliveryOfEvent(db: Db, eventId: number, id: number) {
  return db
    .selectFrom('webhook_deliveries')
    .select(['id', 'partner_id'])
    .where('event_id', '=', eventId)
    .where('id', '=', id)
    .executeTakeFirst()
}

/** A delivery as its job reads it. */
export function findDeliveryToSend(db: Db, id: number) {
  return db
    .selectFrom('webhook_deliveries')
    .select(['id', 'uid', 'event_id', 'partner_id', 'payload', 'status'])
    .where('id', '=', id)
    .executeTakeFirst()
}

/** When the last attempt of a delivery was signed (epoch ms), or undefined before its first. */
export async function lastAttemptAt(db: Db, deliveryId: number): Promise<number | undefined> {
  const row = await db
    .selectFrom('webhook_attempts')
    .select(sql<number | null>`max(attempted_at)`.as('at'))
    .where('delivery_id', '=', deliveryId)
    .executeTakeFirst()
  return row?.at == null ? undefined : Number(row.at)
}

/** Gives a delivery up without an attempt (its event has no enabled receiver). */
export async function abandonDelivery(db: Db, id: number): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ status: 'failed', next_attempt_at: null })
    .where('id', '=', id)
    .execute()
}

/**
 * Records one attempt and the delivery's new state, in the caller's transaction; with `disable` (the
 * receiver answered 410) the webhook is disabled too.
 */
export async function recordAttempt(
  tx: Db,
  attempt: Insertable<WebhookAttemptsTable>,
  next: { status: string; delivered_at: number | null; next_attempt_at: number | null },
  disable?: { webhookId: number; reason: string; now: number },
): Promise<void> {
  await tx.insertInto('webhook_attempts').values(attempt).execute()
  await tx
    .updateTable('webhook_deliveries')
    .set((eb) => ({ ...next, attempts: eb('attempts', '+', 1) }))
    .where('id', '=', attempt.delivery_id)
    .execute()
  if (disable) await disableWebhook(tx, disable.webhookId, disable.reason, disable.now)
}

/**
 * Notifications still waiting for delivery (their first attempt or a retry), over every event: a sum
 * of the counters kept by migration 019's triggers, one row per event and state, not a scan.
 */
export async function countPendingDeliveries(db: Db): Promise<number> {
  const row = await db
    .selectFrom('delivery_counts')
    .select((eb) => eb.fn.sum<number>('n').as('n'))
    .where('status', '=', 'pending')
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

/**
 * Up to `limit` deliveries created before `before` that are finished (delivered or failed), oldest
 * first: in (created_at, id) order past `after`, over the index webhook_deliveries_created_id.
 */
export async function finishedDeliveriesBefore(db: Db, before: number, limit: number, after?: PruneCursor) {
  let due = db
    .selectFrom('webhook_deliveries')
    .select(['created_at', 'id'])
    .where('created_at', '<', before)
    .where('status', '<>', 'pending')
  if (after)
    due = due.where((eb) => eb(eb.refTuple('created_at', 'id'), '>', eb.tuple(after[0], Number(after[1]))))
  return due.orderBy('created_at').orderBy('id').limit(limit).execute()
}

/**
 * Deletes those of `ids` that are still finished, with their attempts, in the caller's transaction: one
 * sent again meanwhile (pending) stays, with its attempts. Returns how many.
 */
export async function deleteFinishedDeliveries(tx: Db, ids: number[]): Promise<number> {
  const finished = tx
    .selectFrom('webhook_deliveries')
    .select('id')
    .where('id', 'in', ids)
    .where('status', '<>', 'pending')
  await tx.deleteFrom('webhook_attempts').where('delivery_id', 'in', finished).execute()
  const r = await tx
    .deleteFrom('webhook_deliveries')
    .where('id', 'in', ids)
    .where('status', '<>', 'pending')
    .executeTakeFirst()
  return Number(r.numDeletedRows)
}

/** Some partners' deliveries by status and whether they were tried (a partner's dashboard figures). */
export async function partnerDeliveryCounts(db: Db, partnerIds: number[]) {
  if (partnerIds.length === 0) return []
  const tried = sql<number>`case when attempts = 0 then 0 else 1 end`
  const rows = await db
    .selectFrom('webhook_deliveries')
    .select(['status', tried.as('tried'), sql<number>`count(*)`.as('count')])
    .where('partner_id', 'in', partnerIds)
    .groupBy(['status', tried])
    .execute()
  return rows.map((r) => ({ status: r.status, tried: Number(r.tried), count: Number(r.count) }))
}
