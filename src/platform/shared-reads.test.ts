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

test('back-to-back callers share reads: a read or two an interval; other keys are not held back', async () => {
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
  assert.ok(calls > 2 * a.starts.length, `${calls} calls, ${a.starts.length} reads`)
  // A read waiting for the running one starts an interval after it; a caller finding none running
  // starts one at once: at most two starts an interval.
  assert.ok(
    a.starts.length <= 2 * Math.ceil(elapsed / interval) + 2,
    `${a.starts.length} reads in ${elapsed} ms`,
  )
  // Key b was never read: its first caller starts at once, however busy key a was.
  await shared('b', b.read)
  assert.equal(b.starts.length, 1)
})

test('one caller alone is never held back: each of its calls starts a read at once', {
  timeout: 30_000,
}, async () => {
  const interval = 60_000
  const shared = sharedReads<number>(interval)
  const { starts, read } = countingRead()
  for (let i = 0; i < 5; i++) {
    const arrived = performance.now()
    const startedAt = await shared('solo', read)
    assert.ok(startedAt >= arrived && startedAt - arrived < interval / 2, 'it waited for an interval')
  }
  assert.equal(starts.length, 5)
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
