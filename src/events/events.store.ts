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

