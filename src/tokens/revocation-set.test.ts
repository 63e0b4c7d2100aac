import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { RevocationSet, RevocationSetBuilder } from './revocation-set.js'

/** The compact revocation list: every live jti found, no other, expired ones swept. */

const jtis = (n: number, tag: string) =>
  Array.from({ length: n }, (_, i) => `${tag}-${i}-${randomBytes(12).toString('base64url')}`)

const NOW = 1_800_000_000_000
const HOUR = 3_600_000

test('a loaded set holds every live jti and no other', () => {
  const revoked = jtis(50_000, 'r')
  const builder = new RevocationSetBuilder(16)
  for (const j of revoked) builder.add(j, NOW + HOUR)
  // Loaded twice over (a page read again after a retry): held once.
  for (const j of revoked.slice(0, 100)) builder.add(j, NOW + 2 * HOUR)
  const set = new RevocationSet()
  set.install(builder, NOW)
  assert.equal(set.size, revoked.length)
  assert.equal(set.arrayBytes(), revoked.length * 12, '12 bytes an entry')
  for (const j of revoked) assert.equal(set.has(j), true, j)
  for (const j of jtis(50_000, 'good')) assert.equal(set.has(j), false, j)
  assert.equal(set.has(''), false)
})

test('an entry expired at the load is left out; what is added later is held, merged and swept on expiry', () => {
  const builder = new RevocationSetBuilder()
  builder.add('expired', NOW - 1)
  builder.add('live', NOW + HOUR)
  const set = new RevocationSet()
  set.install(builder, NOW)
  assert.equal(set.has('expired'), false)
  assert.equal(set.has('live'), true)

  set.add('gone already', NOW, NOW)
  assert.equal(set.has('gone already'), false, 'expired when added')
  const later = jtis(100, 'later')
  for (const j of later) set.add(j, NOW + 2 * HOUR, NOW)
  set.add('short', NOW + 1000, NOW)
  for (const j of [...later, 'short', 'live']) assert.equal(set.has(j), true, j)

  // Nothing expired, few recent entries: the sweep leaves the arrays alone.
  assert.equal(set.sweep(NOW), 0)
  assert.equal(set.arrayBytes(), 12)
  // Merged into the arrays when the recent ones are many.
  assert.equal(set.sweep(NOW, 10), 0)
  assert.equal(set.arrayBytes(), 102 * 12)
  for (const j of [...later, 'short', 'live']) assert.equal(set.has(j), true, j)

  // An hour on: 'short' and 'live' have expired; the later ones stay.
  assert.equal(set.sweep(NOW + HOUR), 2)
  assert.equal(set.has('short'), false)
  assert.equal(set.has('live'), false)
  for (const j of later) assert.equal(set.has(j), true, j)
  assert.equal(set.size, 100)

  // A load installed later keeps what the arrays hold.
  const next = new RevocationSetBuilder()
  next.add('from the load', NOW + 3 * HOUR)
  set.install(next, NOW + HOUR)
  for (const j of [...later, 'from the load']) assert.equal(set.has(j), true, j)
  assert.equal(set.sweep(NOW + 4 * HOUR), 101)
  assert.equal(set.size, 0)
})

test('a page read as lines holds the same jtis as one read entry by entry, and names its last entry', () => {
  const revoked = [...jtis(2_000, 'r'), 'account:consumer:7:3', 'x', 'account:admin:12:1']
  const exp = (i: number) => NOW + HOUR + i * 1_000
  const lines = revoked.map((j, i) => `${exp(i)} ${j}`).join('\n')
  const accounts: [string, number][] = []
  const builder = new RevocationSetBuilder(16)
  const page = builder.addLines(lines, 'account:', (jti, at) => accounts.push([jti, at]))
  assert.deepEqual(page, {
    count: revoked.length,
    expiresAt: exp(revoked.length - 1),
    jti: 'account:admin:12:1',
  })
  assert.deepEqual(accounts, [
    ['account:consumer:7:3', exp(2_000)],
    ['account:admin:12:1', exp(2_002)],
  ])
  const set = new RevocationSet()
  set.install(builder, NOW)
  assert.equal(set.size, revoked.length)
  for (const j of revoked) assert.equal(set.has(j), true, j)
  for (const j of jtis(2_000, 'good')) assert.equal(set.has(j), false, j)
  assert.equal(
    builder.addLines('', 'account:', () => assert.fail('no entry')),
    undefined,
    'an empty page',
  )
  assert.throws(() => new RevocationSetBuilder().addLines('12x4 jti', 'account:', () => {}), /unreadable/)
})
