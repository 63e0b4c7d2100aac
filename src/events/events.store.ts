import type { Db } from '../platform/db/database.js'

/** Whether an event with this id exists: the one place that asks (routes answer 404 "Event not found"). */
export async function eventExists(db: Db, id: number): Promise<boolean> {
  const found = await db.selectFrom('events').select('id').where('id', '=', id).executeTakeFirst()
  return found !== undefined
}

/** The ids among `ids` that name no event. */
export async function missingEvents(db: Db, ids: readonly number[]): Promise<number[]> {
  if (ids.length === 0) return []
  const found = await db.selectFrom('events').select('id').where('id', 'in', ids).execute()
  const have = new Set(found.map((r) => r.id))
  return ids.filter((id) => !have.has(id))
}

/** The event's name; throws when there is no such event. */
export async function eventName(db: Db, id: number): Promise<string> {
  const r = await db.selectFrom('events').select('name').where('id', '=', id).executeTakeFirstOrThrow()
  return r.name
}

const SUMMARY = ['id', 'uid', 'name', 'timezone'] as const

/** An event's id, uid, name and time zone; undefined when there is none. */
export async function findEventSummary(db: Db, id: number) {
  return db.selectFrom('events').select(SUMMARY).where('id', '=', id).executeTakeFirst()
}

/** The events (all, or those of `ids`), in name order. */
export async function listEventSummaries(db: Db, ids: readonly number[] | 'all') {
  let q = db.selectFrom('events').select(SUMMARY).orderBy('name').orderBy('id')
  if (ids !== 'all') {
    if (ids.length === 0) return []
    q = q.where('id', 'in', ids)
  }
  return q.execute()
}

/**
 * Seed files: updates the event with this id (or, without one, this uid), or creates it, with the
 * given id or the next free one. Returns its id.
 */
export async function upsertEvent(
  db: Db,
  event: { id?: number | undefined; uid: string; name: string; timezone: string },
  now: number,
): Promise<number> {
  const values = { uid: event.uid, name: event.name, timezone: event.timezone }
  const found = await db
    .selectFrom('events')
    .select('id')
    .where((eb) => (event.id ? eb('id', '=', event.id) : eb('uid', '=', event.uid)))
    .executeTakeFirst()
  if (found) {
    await db.updateTable('events').set(values).where('id', '=', found.id).execute()
    return found.id
  }
  const max = await db
    .selectFrom('events')
    .select((eb) => eb.fn.max('id').as('m'))
    .executeTakeFirst()
  const id = event.id ?? Number(max?.m ?? 0) + 1
  await db
    .insertInto('events')
    .values({ id, ...values, created_at: now })
    .execute()
  return id
}

/** The event's current feed position, or undefined when there is no such event. */
export async function feedPosition(db: Db, eventId: number): Promise<number | undefined> {
  const r = await db.selectFrom('events').select('feed_seq').where('id', '=', eventId).executeTakeFirst()
  return r === undefined ? undefined : Number(r.feed_seq)
}

/**
 * The next position in an event's sync feed. The UPDATE also locks the event's row until the caller's
 * transaction ends, so positions become visible in the order they were handed out and a scanner's
 * cursor never passes a change that commits later. Call it last in a transaction (after its other row
 * locks) so that every transaction takes the locks in the same order.
 */
export async function nextFeedSeq(tx: Db, eventId: number): Promise<number> {
  const r = await tx
    .updateTable('events')
    .set((eb) => ({ feed_seq: eb('feed_seq', '+', 1) }))
    .where('id', '=', eventId)
    .returning('feed_seq')
    .executeTakeFirstOrThrow()
  return Number(r.feed_seq)
}

/**
 * `n` consecutive positions in an event's sync feed (a batch of new transfers), locking the event's
 * row as nextFeedSeq does; answers the first of them.
 */
export async function reserveFeedSeqs(tx: Db, eventId: number, n: number): Promise<number> {
  const r = await tx
    .updateTable('events')
    .set((eb) => ({ feed_seq: eb('feed_seq', '+', n) }))
    .where('id', '=', eventId)
    .returning('feed_seq')
    .executeTakeFirstOrThrow()
  return Number(r.feed_seq) - n + 1
}
