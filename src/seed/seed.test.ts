// The seed document's checks that its schema cannot state.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseSeed, SeedError } from './seed.js'

test('an event whose time zone the zone database does not know is refused, naming the record', () => {
  const doc = { events: [{ id: 1, uid: 'summer-fest-2026', name: 'Summer Fest', timezone: 'Europe/Berln' }] }
  assert.throws(
    () => parseSeed(doc),
    (err: unknown) =>
      err instanceof SeedError &&
      /\/events\/0\/timezone: "Europe\/Berln" is not a time zone .*event summer-fest-2026/.test(err.message),
  )
  // IANA names, their aliases and UTC pass; so does an event without a zone (UTC).
  for (const timezone of ['Europe/Berlin', 'Asia/Calcutta', 'UTC', 'America/Argentina/Buenos_Aires'])
    assert.equal(parseSeed({ events: [{ ...doc.events[0], timezone }] }).events?.[0]?.timezone, timezone)
  assert.ok(parseSeed({ events: [{ id: 1, uid: 'a', name: 'A' }] }))
})
