import assert from 'node:assert/strict'
import { test } from 'node:test'
import { epochOfLocal, LocalTimeFormatter } from '../../../src/platform/formats.js'
import {
  CHECKIN_CHECKPOINTS,
  CHECKIN_LISTS,
  CHECKIN_SCANS,
  CHECKIN_TICKETS,
  CHECKIN_TIMEZONE,
  type CheckinCounts,
  type CheckinListKey,
  DEFAULT_LIST_RULES,
} from '../../../test/helpers/checkin-cases.js'
import { type CheckinRules, countedOutAt, decideCheckin, type PriorScan, presence } from './checkin-rules.js'

/** The lists of the case table as the rule takes them (ticket types named by their key, as uids). */
const rules = (key: CheckinListKey): CheckinRules => {
  if (key === 'default') return DEFAULT_LIST_RULES
  const { ticket_types, ...rest } = CHECKIN_LISTS[key]
  return { ...rest, ticket_type_ids: ticket_types }
}

test('the check-in case table, decided by the rule alone', () => {
  const accepted = new Map<string, PriorScan[]>()
  const used = new Set<string>()
  for (const s of CHECKIN_SCANS) {
    const key = `${s.ticket}/${s.list}`
    const prior = accepted.get(key) ?? []
    const decision = decideCheckin(rules(s.list), CHECKIN_TICKETS[s.ticket], prior, s.direction, s.at)
    const label = `${s.at} ${s.ticket} ${s.direction} ${s.list}`
    assert.deepEqual(
      decision,
      s.expect === 'accepted' ? { accepted: true } : { accepted: false, reason: s.expect },
      label,
    )
    if (!decision.accepted) continue
    accepted.set(key, [...prior, { direction: s.direction, at: s.at }])
    const first = s.direction === 'entry' && !used.has(s.ticket)
    if (first) used.add(s.ticket)
    assert.equal(first, s.first_use === true, `${label}: first use`)
  }
  assert.equal(used.size, Object.keys(CHECKIN_TICKETS).length, 'every ticket of the table is used once')
})

test('exit_all_at counts out on the day of the entry when still ahead, else the next day', () => {
  assert.equal(countedOutAt('04:00', '2027-07-16T23:00:00'), '2027-07-17T04:00:00')
  assert.equal(countedOutAt('04:00', '2027-07-17T02:00:00.500'), '2027-07-17T04:00:00')
  assert.equal(countedOutAt('04:00', '2027-07-17T04:00:00'), '2027-07-18T04:00:00')
  // Month and year ends
  assert.equal(countedOutAt('03:00', '2027-12-31T22:00:00'), '2028-01-01T03:00:00')
  assert.equal(countedOutAt('23:30', '2028-02-29T23:45:00'), '2028-03-01T23:30:00')
  const lounge = { exit_all_at: '03:00' }
  const entered = [{ direction: 'entry' as const, at: '2027-07-16T22:00:00' }]
  assert.deepEqual(presence(lounge, entered, '2027-07-17T02:59:59.999'), {
    inside: true,
    since: '2027-07-16T22:00:00',
  })
  assert.deepEqual(presence(lounge, entered, '2027-07-17T03:00:00'), { inside: false })
  assert.deepEqual(presence({ exit_all_at: null }, entered, '2027-08-01T00:00:00'), {
    inside: true,
    since: '2027-07-16T22:00:00',
  })
})

test('the latest accepted scan by time decides re-entry, whatever order the scans were recorded in', () => {
  const camping = rules('camping')
  // An exit uploaded after a later entry was recorded (two offline gates): the entry is still the latest.
  const prior: PriorScan[] = [
    { direction: 'entry', at: '2027-07-16T10:00:00' },
    { direction: 'entry', at: '2027-07-16T20:00:00' },
    { direction: 'exit', at: '2027-07-16T15:00:00' },
  ]
  assert.deepEqual(decideCheckin(camping, 'weekend', prior, 'entry', '2027-07-16T21:00:00'), {
    accepted: false,
    reason: 'already_used',
  })
  assert.deepEqual(
    decideCheckin(camping, 'weekend', prior.slice(0, 1).concat(prior[2]!), 'entry', '2027-07-16T21:00:00'),
    {
      accepted: true,
    },
  )
})

test('the case table: its times exist in the festival’s zone, in order, and its checkpoints add up', () => {
  const f = new LocalTimeFormatter()
  for (const s of CHECKIN_SCANS)
    assert.equal(f.format(epochOfLocal(s.at, CHECKIN_TIMEZONE), CHECKIN_TIMEZONE).slice(0, 19), s.at)
  assert.deepEqual(
    CHECKIN_SCANS.map((s) => s.at),
    CHECKIN_SCANS.map((s) => s.at).sort(),
  )
  // The counts of each checkpoint, from the table's expectations (not from the rule): a ticket is inside
  // from an accepted entry until an exit or the next exit_all_at moment.
  for (const { at, counts } of CHECKIN_CHECKPOINTS)
    for (const list of Object.keys(counts) as CheckinListKey[]) {
      const scans = CHECKIN_SCANS.filter((s) => s.list === list && s.at <= at)
      const accepted = scans.filter((s) => s.expect === 'accepted')
      const exitAll = rules(list).exit_all_at
      let inside = 0
      let countedOut = 0
      for (const ticket of new Set(accepted.map((s) => s.ticket))) {
        const own = accepted.filter((s) => s.ticket === ticket)
        let since: string | undefined
        for (const [i, s] of own.entries()) {
          const until = own[i + 1]?.at ?? at
          if (s.direction === 'exit') since = undefined
          else since ??= s.at
          if (since !== undefined && exitAll !== null && countedOutAt(exitAll, since) <= until) {
            countedOut++
            since = undefined
          }
        }
        if (since !== undefined) inside++
      }
      const refused: CheckinCounts['refused'] = {}
      for (const s of scans) if (s.expect !== 'accepted') refused[s.expect] = (refused[s.expect] ?? 0) + 1
      assert.deepEqual(
        {
          inside,
          entries: accepted.filter((s) => s.direction === 'entry').length,
          exits: accepted.filter((s) => s.direction === 'exit').length,
          counted_out: countedOut,
          refused,
        },
        counts[list],
        `${list} at ${at}`,
      )
    }
})
