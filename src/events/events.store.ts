import type { Db } from '../platform/db/database.js'

/** Whether an event with this id exists: the one place that asks (routes answer 404 "Event not found"). */
export async function eventExists(db: Db, id: number): Promise<boolean> {
  const found = await db.selectFrom('events').select('id').where('id', '=', id).executeTakeFirst()
  return found !== undefined
}
