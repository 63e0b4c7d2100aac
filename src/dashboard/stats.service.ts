import type { Static } from 'typebox'
import type { Clock } from '../platform/clock.js'
import type { Db } from '../platform/db/database.js'
import { NotFoundError } from '../platform/errors.js'
import type { EventStats } from './stats.schemas.js'
import type { Range } from './templates.js'

export interface StatsDeps {
  db: Db
  clock: Clock
}

export async function findEvent(db: Db, eventId: number) {
  const event = await db
    .selectFrom('events')
    .select(['id', 'uid', 'name', 'timezone'])
    .where('id', '=', eventId)
    .executeTakeFirst()
  if (!event) throw new NotFoundError('Event not found')
  return event
}

/** The figures of one event, as the page and the JSON API show them. Access is the caller's check. */
export async function eventStats(
  deps: StatsDeps,
  eventId: number,
  _range: Range,
): Promise<Static<typeof EventStats>> {
  const event = await findEvent(deps.db, eventId)
  return { event, generated_at: new Date(deps.clock.now()).toISOString() }
}
