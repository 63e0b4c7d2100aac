import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pino from 'pino'
import { eachBackend, httpBackends, useDatabase } from '../../../test/helpers/backends.js'
import { TestClock } from '../../../test/helpers/clock.js'
import { until } from '../../../test/helpers/until.js'
import { openDatabase } from '../db/database.js'
import { enqueue, JobRunner, RetryLater } from './jobs.js'

const log = pino({ level: 'silent' })

eachBackend(httpBackends, 'job queue', (backend) => {
  const database = useDatabase(backend)
  const clock = new TestClock()
  const runner = () =>
    new JobRunner({
      db: database.handle().db,
      dialect: database.handle().dialect,
      clock,
      log,
      pollMs: 10_000,
      leaseMs: 60_000,
    })

  test('a due job runs once and is marked done', async () => {
    const r = runner()
    const seen: unknown[] = []
    r.register('t1', { retrySchedule: [], run: async (p) => void seen.push(p) })
    await enqueue(database.handle().db, clock.now(), { kind: 't1', payload: { n: 1 } })
    assert.equal(await r.runDue(), 1)
    assert.equal(await r.runDue(), 0)
    assert.deepEqual(seen, [{ n: 1 }])
  })

  test('a job scheduled later waits for its time', async () => {
    const r = runner()
    let runs = 0
    r.register('t2', { retrySchedule: [], run: async () => void runs++ })
    await enqueue(database.handle().db, clock.now(), { kind: 't2', payload: {}, runAt: clock.now() + 60_000 })
    await r.runDue()
    assert.equal(runs, 0)
    clock.advance(60_001)
    await r.runDue()
    assert.equal(runs, 1)
  })

  test('a failing job is retried on its schedule, then marked failed', async () => {
    const r = runner()
    let runs = 0
    r.register('t3', {
      retrySchedule: [5, 30],
      run: async () => {
        runs++
        throw new Error('receiver down')
      },
    })
    await enqueue(database.handle().db, clock.now(), { kind: 't3', payload: {} })
    await r.runDue()
    clock.advance(4_000)
    await r.runDue()
    assert.equal(runs, 1, 'retried before its delay')
    clock.advance(1_001)
    await r.runDue()
    assert.equal(runs, 2)
    clock.advance(30_001)
    await r.runDue()
    assert.equal(runs, 3)
    clock.advance(3_600_000)
    await r.runDue()
    assert.equal(runs, 3, 'ran after the schedule was exhausted')
    const row = await database
      .handle()
      .db.selectFrom('jobs')
      .selectAll()
      .where('kind', '=', 't3')
      .executeTakeFirstOrThrow()
    assert.notEqual(row.failed_at, null)
    assert.equal(row.last_error, 'receiver down')
  })

  test('RetryLater sets its own delay', async () => {
    const r = runner()
    let runs = 0
    r.register('t4', {
      retrySchedule: [1],
      run: async () => {
        if (++runs === 1) throw new RetryLater(120_000, 'busy')
      },
    })
    await enqueue(database.handle().db, clock.now(), { kind: 't4', payload: {} })
    await r.runDue()
    clock.advance(60_000)
    await r.runDue()
    assert.equal(runs, 1)
    clock.advance(60_001)
    await r.runDue()
    assert.equal(runs, 2)
  })

  test('a pending job absorbs enqueues with the same dedupe key; a new one starts after it ran', async () => {
    const r = runner()
    let runs = 0
    r.register('t5', { retrySchedule: [], run: async () => void runs++ })
    assert.equal(
      await enqueue(database.handle().db, clock.now(), { kind: 't5', payload: {}, dedupeKey: 'k' }),
      true,
    )
    assert.equal(
      await enqueue(database.handle().db, clock.now(), { kind: 't5', payload: {}, dedupeKey: 'k' }),
      false,
    )
    await r.runDue()
    assert.equal(runs, 1)
    assert.equal(
      await enqueue(database.handle().db, clock.now(), { kind: 't5', payload: {}, dedupeKey: 'k' }),
      true,
    )
  })

  test('two runners at once run each job exactly once', async () => {
    const a = runner()
    const b = runner()
    const ran: number[] = []
    const handler = {
      retrySchedule: [],
      run: async (p: { i: number }) => {
        ran.push(p.i)
      },
    }
    a.register('t6', handler)
    b.register('t6', handler)
    for (let i = 0; i < 30; i++)
      await enqueue(database.handle().db, clock.now(), { kind: 't6', payload: { i } })
    while ((await Promise.all([a.runDue(), b.runDue()])).some((n) => n > 0)) {}
    assert.equal(ran.length, 30)
    assert.equal(new Set(ran).size, 30)
  })

  test('a job whose runner died is picked up after its lease', async () => {
    const r = runner()
    let runs = 0
    r.register('t7', { retrySchedule: [], run: async () => void runs++ })
    await enqueue(database.handle().db, clock.now(), { kind: 't7', payload: {} })
    // Simulate a runner that claimed the job and crashed.
    await database
      .handle()
      .db.updateTable('jobs')
      .set({ locked_until: clock.now() + 60_000 })
      .where('kind', '=', 't7')
      .execute()
    await r.runDue()
    assert.equal(runs, 0)
    clock.advance(60_001)
    await r.runDue()
    assert.equal(runs, 1)
  })

  test('one slow job does not hold up the next poll', async () => {
    const r = new JobRunner({
      db: database.handle().db,
      dialect: database.handle().dialect,
      clock,
      log,
      pollMs: 20,
      leaseMs: 60_000,
    })
    let release!: () => void
    const slowStarted = new Promise<void>((started) => {
      r.register('t8-slow', {
        retrySchedule: [],
        run: () =>
          new Promise<void>((resolve) => {
            release = resolve
            started()
          }),
      })
    })
    let fastRuns = 0
    r.register('t8-fast', { retrySchedule: [], run: async () => void fastRuns++ })
    r.start()
    try {
      await enqueue(database.handle().db, clock.now(), { kind: 't8-slow', payload: {} })
      await slowStarted
      await enqueue(database.handle().db, clock.now(), { kind: 't8-fast', payload: {} })
      await until('the job queued behind the slow one ran', () => fastRuns === 1)
    } finally {
      release?.()
      await r.stop()
    }
  })

  /**
   * Three due jobs, two of a kind that yields to requests (one of them a minute past its time) and a
   * plain one, and a runner polling every 20 ms that records what ran.
   */
  async function yieldingJobs(prefix: string, requestsInFlight?: () => number) {
    const db = database.handle().db
    const ran: string[] = []
    await enqueue(db, clock.now(), { kind: `${prefix}-yields`, payload: 'due now' })
    await enqueue(db, clock.now(), {
      kind: `${prefix}-yields`,
      payload: 'due a minute ago',
      runAt: clock.now() - 60_000,
    })
    await enqueue(db, clock.now(), { kind: `${prefix}-plain`, payload: 'plain' })
    const runner = new JobRunner({
      db,
      dialect: database.handle().dialect,
      clock,
      log,
      pollMs: 20,
      leaseMs: 60_000,
      ...(requestsInFlight ? { requestsInFlight } : {}),
    })
    const record = async (p: unknown) => void ran.push(p as string)
    runner.register(`${prefix}-plain`, { retrySchedule: [], run: record })
    runner.register(`${prefix}-yields`, { retrySchedule: [], yieldsToRequests: true, run: record })
    return { ran, runner }
  }

  test('while the event loop is busy, jobs that yield to requests wait (a minute past their time at most), others run', async () => {
    const { ran, runner: r } = await yieldingJobs('t10')
    // Requests keep the event loop busy: 20 ms of work at a time with no wait in between, from before
    // the first poll until told to stop.
    let busy = true
    const work = () => {
      for (const end = performance.now() + 20; performance.now() < end; );
      if (busy) setImmediate(work)
    }
    work()
    r.start()
    try {
      await until('the plain job and the one due a minute ago ran', () => ran.length >= 2)
      assert.deepEqual([...ran].sort(), ['due a minute ago', 'plain'])
      busy = false
      await until('the job that yields ran once the loop was free', () => ran.length === 3)
      assert.equal(ran.at(-1), 'due now')
    } finally {
      busy = false
      await r.stop()
    }
  })

  test('while a request is answered, jobs that yield to requests wait (a minute past their time at most), others run', async () => {
    let answering = 1
    const { ran, runner: r } = await yieldingJobs('t11', () => answering)
    r.start()
    try {
      await until('the plain job and the one due a minute ago ran', () => ran.length >= 2)
      await sleep(100) // more polls, every 20 ms: the job that yields is passed over while the request lasts
      assert.deepEqual([...ran].sort(), ['due a minute ago', 'plain'])
      answering = 0
      await until('the job that yields ran once no request was answered', () => ran.length === 3)
      assert.equal(ran.at(-1), 'due now')
    } finally {
      await r.stop()
    }
  })

  test('a runner that lost its job to another leaves it as the other left it', async () => {
    const a = runner()
    const b = runner()
    let failLate!: () => void
    a.register('t9', {
      retrySchedule: [5],
      run: () =>
        new Promise<void>((_, reject) => {
          failLate = () => reject(new Error('late failure'))
        }),
    })
    b.register('t9', { retrySchedule: [5], run: async () => undefined })
    await enqueue(database.handle().db, clock.now(), { kind: 't9', payload: {} })
    const ranByA = a.runDue()
    await until('a runs the job', () => failLate !== undefined)
    // a froze past its lease: b takes the job over and finishes it.
    clock.advance(60_001)
    assert.equal(await b.runDue(), 1)
    failLate()
    await ranByA
    const row = await database
      .handle()
      .db.selectFrom('jobs')
      .select(['done_at', 'last_error', 'attempts'])
      .where('kind', '=', 't9')
      .executeTakeFirstOrThrow()
    assert.notEqual(row.done_at, null)
    assert.equal(row.last_error, null, "the stale runner's failure is not written over the finished job")
    assert.equal(row.attempts, 2)
  })
})

test('a job whose outcome cannot be written (the database gone) is logged, never an unhandled rejection', async () => {
  const handle = await openDatabase('sqlite::memory:')
  await handle.migrate()
  const lines: string[] = []
  const runner = new JobRunner({
    db: handle.db,
    dialect: handle.dialect,
    clock: new TestClock(),
    log: pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }),
    pollMs: 20,
    leaseMs: 60_000,
  })
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => unhandled.push(reason)
  process.on('unhandledRejection', onUnhandled)
  try {
    // The job runs, and the database goes away before its outcome is written (a network cut does this
    // on PostgreSQL; here the handle is closed).
    runner.register('cut', { retrySchedule: [], run: () => handle.close() })
    await enqueue(handle.db, Date.now(), { kind: 'cut', payload: {} })
    runner.start()
    await until('the failed write is logged', async () =>
      lines.some((l) => l.includes('could not record a job outcome')),
    )
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(unhandled, [])
  } finally {
    process.off('unhandledRejection', onUnhandled)
    await runner.stop()
  }
})
