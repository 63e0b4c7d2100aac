import assert from 'node:assert/strict'
import { test } from 'node:test'
import { LocalTime } from './local-time.js'

/** What `Intl` says, formatted anew for every instant: the answer LocalTime must give. */
function viaIntl(timeZone: string) {
  const f = new Intl.DateTimeFormat('sv-SE', { timeZone, dateStyle: 'short', timeStyle: 'medium' })
  return (ms: number) => f.format(ms).replace(' ', 'T')
}

/** Every `step` ms from `from` to `until` (UTC ISO times). */
function* instants(from: string, until: string, step: number) {
  for (let ms = Date.parse(from); ms <= Date.parse(until); ms += step) yield ms
}

/**
 * Around each change of daylight saving time: Berlin's (an hour, at 01:00 UTC), New York's (at 02:00
 * local), Lord Howe's (half an hour, at 02:00 local = 15:30 UTC) and Chatham's (45-minute offsets).
 * Each instant is asked twice, in an order that fills the hours' offsets from the instants themselves.
 */
const CHANGES: [zone: string, from: string, until: string][] = [
  ['Europe/Berlin', '2027-03-27T22:00:00Z', '2027-03-28T04:00:00Z'],
  ['Europe/Berlin', '2027-10-30T22:00:00Z', '2027-10-31T04:00:00Z'],
  ['America/New_York', '2027-03-14T05:00:00Z', '2027-03-14T09:00:00Z'],
  ['America/New_York', '2027-11-07T04:00:00Z', '2027-11-07T08:00:00Z'],
  ['Australia/Lord_Howe', '2027-04-03T13:00:00Z', '2027-04-03T17:00:00Z'],
  ['Australia/Lord_Howe', '2027-10-02T14:00:00Z', '2027-10-02T18:00:00Z'],
  ['Pacific/Chatham', '2027-04-03T12:00:00Z', '2027-04-03T16:00:00Z'],
  ['Asia/Kathmandu', '2027-07-16T00:00:00Z', '2027-07-17T00:00:00Z'],
]

for (const [zone, from, until] of CHANGES) {
  test(`the local time in ${zone} from ${from} to ${until}, to the second, is Intl's`, () => {
    const expected = viaIntl(zone)
    const local = new LocalTime(zone)
    const all = [...instants(from, until, 7_001)]
    // Backwards first: each hour's offset is first asked from its last instants.
    for (const ms of [...all].reverse())
      assert.equal(local.format(ms), expected(ms), new Date(ms).toISOString())
    for (const ms of all) assert.equal(local.format(ms), expected(ms), new Date(ms).toISOString())
    // The seconds either side of every change, where a hour's offset is no longer its start's.
    for (let ms = Date.parse(from); ms <= Date.parse(until); ms += 60_000)
      for (const d of [-1000, -1, 0, 999, 1000]) assert.equal(local.format(ms + d), expected(ms + d))
  })
}

test('instants over years in the festival zone, in any order, are formatted as Intl formats them', () => {
  const zone = 'Europe/Berlin'
  const expected = viaIntl(zone)
  const local = new LocalTime(zone)
  let seed = 42
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
    return seed / 2 ** 31
  }
  const start = Date.parse('1990-01-01T00:00:00Z')
  const span = Date.parse('2060-01-01T00:00:00Z') - start
  for (let i = 0; i < 20_000; i++) {
    const ms = start + Math.floor(random() * span)
    assert.equal(local.format(ms), expected(ms), new Date(ms).toISOString())
  }
})

test('a zone the runtime does not know is refused when made', () => {
  assert.throws(() => new LocalTime('Europe/Atlantis'), RangeError)
})
