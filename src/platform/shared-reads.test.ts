import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sharedReads } from './shared-reads.js'

/** A read that counts its starts and answers with the instant it started. */
function countingRead() {
  const starts: number[] = []
  return {
    starts,
    read: async () => {
      const at = performance.now()
      starts.push(at)
      await new Promise((r) => setTimeout(r, 5))
      return at
    },
  }
}

test('callers that arrive together share one read, which starts after each of them arrived', async () => {
  const shared = sharedReads<number>(40)
  const { starts, read } = countingRead()
  const arrivals: number[] = []
  const answers = await Promise.all(
    Array.from({ length: 8 }, () => {
      arrivals.push(performance.now())
      return shared('event 1', read)
    }),
  )
  // The first starts a read at once; the seven that arrive after it started wait for the next one.
  assert.equal(starts.length, 2)
  assert.equal(answers[0], starts[0])
  assert.deepEqual(new Set(answers.slice(1)), new Set([starts[1]]))
  for (const [i, startedAt] of answers.entries())
    assert.ok(startedAt >= arrivals[i]!, `caller ${i} got an older read`)
})

test('back-to-back callers read one key at most once an interval; other keys are not held back', async () => {
  const interval = 30
  const shared = sharedReads<number>(interval)
  const a = countingRead()
  const b = countingRead()
  const began = performance.now()
  let calls = 0
  const caller = async () => {
    while (performance.now() - began < 300) {
      const arrived = performance.now()
      assert.ok((await shared('a', a.read)) >= arrived)
      calls++
    }
  }
  await Promise.all(Array.from({ length: 8 }, caller))
  const elapsed = performance.now() - began
  assert.ok(calls > a.starts.length, 'callers shared no read')
  assert.ok(
    a.starts.length <= Math.floor(elapsed / interval) + 1,
    `${a.starts.length} reads in ${elapsed} ms`,
  )
  // Node's timers keep millisecond time and may fire up to a millisecond early.
  for (let i = 1; i < a.starts.length; i++) assert.ok(a.starts[i]! - a.starts[i - 1]! >= interval - 2)
  // Key b was never read: its first caller starts at once, however busy key a was.
  await shared('b', b.read)
  assert.equal(b.starts.length, 1)
})

test('a failed read fails its sharers, and the next caller reads again', async () => {
  const shared = sharedReads<number>(20)
  let fail = true
  let reads = 0
  const read = async () => {
    reads++
    if (fail) throw new Error('database down')
    return reads
  }
  const first = shared('k', read)
  const sharers = [shared('k', read), shared('k', read)]
  await assert.rejects(first, /database down/)
  for (const s of sharers) await assert.rejects(s, /database down/)
  assert.equal(reads, 2)
  fail = false
  assert.equal(await shared('k', read), 3)
})
