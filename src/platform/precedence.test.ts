import assert from 'node:assert/strict'
import { mock, test } from 'node:test'
import { RequestPrecedence } from './precedence.js'

/** What `promise` resolved with by now (its callbacks and those queued before them ran), or undefined. */
async function settled<T>(promise: Promise<T>): Promise<T | undefined> {
  let value: T | undefined
  void promise.then((v) => {
    value = v
  })
  await new Promise((resolve) => setImmediate(resolve))
  return value
}

test('a bulk answer takes its turn at once when nothing else is answered, else once the last other request closed', async () => {
  const precedence = new RequestPrecedence()
  const first = await settled(precedence.turn(50))
  assert.ok(first, 'nothing else was being answered')
  first()
  precedence.opened()
  precedence.opened()
  const turn = precedence.turn(60_000)
  assert.equal(await settled(turn), undefined)
  precedence.closed()
  assert.equal(await settled(turn), undefined, 'one request is still being answered')
  precedence.closed()
  assert.ok(await settled(turn))
})

test('bulk answers take their turns one at a time, in the order they asked', async () => {
  const precedence = new RequestPrecedence()
  const a = (await settled(precedence.turn(60_000)))!
  const b = precedence.turn(60_000)
  const c = precedence.turn(60_000)
  assert.equal(await settled(b), undefined, 'a holds the turn')
  a()
  a()
  const bDone = await settled(b)
  assert.ok(bDone)
  assert.equal(await settled(c), undefined, 'b holds the turn (ending a twice gave no second one)')
  bDone()
  assert.ok(await settled(c))
})

test('a bulk answer waits at most its cap however busy the instance is', async () => {
  mock.timers.enable({ apis: ['setTimeout'] })
  try {
    const precedence = new RequestPrecedence()
    precedence.opened()
    const turn = precedence.turn(50)
    mock.timers.tick(49)
    assert.equal(await settled(turn), undefined)
    mock.timers.tick(1)
    const done = await settled(turn)
    assert.ok(done)
    // Out of the line: the request closing later gives the turn to no one, and ending it frees the instance.
    precedence.closed()
    done()
    assert.ok(await settled(precedence.turn(50)))
  } finally {
    mock.timers.reset()
  }
})

test('background work waits for no request to be open, or for its cap, one step a gap while busy; bulk answers do not hold it', async () => {
  mock.timers.enable({ apis: ['setTimeout'] })
  try {
    let now = 0
    const precedence = new RequestPrecedence(() => now)
    const page = (await settled(precedence.turn(50)))!
    assert.equal(await settled(precedence.quiet(50)), false, 'a page being sent is no request, and none was')
    page()
    precedence.opened()
    precedence.opened()
    const step = precedence.quiet(60_000)
    precedence.closed()
    assert.equal(await settled(step), undefined, 'one request is still being answered')
    precedence.closed()
    assert.equal(await settled(step), true, 'it went on as the requests ended: the instance is busy')
    // Busy: one step a gap between requests. The next waits for the next gap.
    const next = precedence.quiet(60_000)
    assert.equal(await settled(next), undefined, 'this gap gave its step')
    precedence.opened()
    assert.equal(await settled(next), undefined)
    precedence.closed()
    assert.equal(await settled(next), true, 'a new gap: the next step, busy')
    now += 99
    const late = precedence.quiet(50)
    assert.equal(
      await settled(late),
      undefined,
      'a request closed 99 ms ago: still busy, and this gap gave its step',
    )
    mock.timers.tick(50)
    assert.equal(await settled(late), true, 'no new gap: it goes on after its cap, busy')
    now += 1
    assert.equal(await settled(precedence.quiet(50)), false, 'none for 100 ms: quiet')
    assert.equal(await settled(precedence.quiet(50)), false, 'quiet: no wait, however many ask')
    precedence.opened()
    const capped = precedence.quiet(50)
    mock.timers.tick(49)
    assert.equal(await settled(capped), undefined)
    mock.timers.tick(1)
    assert.equal(await settled(capped), true, 'the gate never went quiet: it goes on anyway, busy')
  } finally {
    mock.timers.reset()
  }
})
