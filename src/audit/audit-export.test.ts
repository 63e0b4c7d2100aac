import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { login, STANDARD_SEED, startApp, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { until } from '../../test/helpers/until.js'
import { type Db, openDatabase } from '../platform/db/database.js'

interface Entry {
  id: number
  kind: string
  actor: string | null
  cursor?: string
}

interface Page {
  items: Entry[]
  next_before: number | null
  next_after: string | null
}

const row = (kind: string, actor = 'test') => ({
  at: Date.now(),
  kind,
  actor,
  ip: null,
  outcome: 'success',
  detail: JSON.stringify({ n: 1 }),
})

async function allIds(db: Db): Promise<number[]> {
  return (await db.selectFrom('audit_log').select('id').orderBy('id').execute()).map((r) => r.id)
}

eachBackend(httpBackends, 'audit export: GET /admin/audit?after=', (backend) => {
  let t: TestApp
  let root: string

  before(async () => {
    t = await startApp(backend)
    await t.seed(STANDARD_SEED)
    root = (await login(t, 'root@example.com')).access_token
  })
  after(async () => t.close())

  const page = async (query: string): Promise<Page> => {
    const res = await t.request({ method: 'GET', url: `/admin/audit?${query}`, token: root })
    assert.equal(res.statusCode, 200, res.body)
    return res.json()
  }

  /** Every entry after `cursor`, a page of `limit` at a time, and the cursor after the last. */
  const drain = async (cursor: string, limit = 7) => {
    const seen: Entry[] = []
    for (;;) {
      const p = await page(`after=${cursor}&limit=${limit}`)
      seen.push(...p.items)
      assert.ok(p.next_after)
      cursor = p.next_after
      if (p.items.length < limit) return { seen, cursor }
    }
  }

  /**
   * Drains from `cursor` until `enough` holds for what was handed out. On PostgreSQL an entry is handed
   * out once every write transaction of the cluster older than it has ended: the machine's other tests
   * hold some open for moments, so a committed entry is settled soon, not at once.
   */
  const drainUntil = async (cursor: string, limit: number, enough: (seen: Entry[]) => boolean) => {
    const seen: Entry[] = []
    await until('the entries to be handed out', async () => {
      const more = await drain(cursor, limit)
      seen.push(...more.seen)
      cursor = more.cursor
      return enough(seen)
    })
    return { seen, cursor }
  }

  test('pages forwards from 0-0: every entry once, oldest first, each with its cursor', async () => {
    await t.db.db
      .insertInto('audit_log')
      .values([row('export_a'), row('export_b'), row('export_c')])
      .execute()
    const all = await allIds(t.db.db)
    const { seen, cursor } = await drainUntil('0-0', 2, (s) => s.length >= all.length)
    assert.deepEqual(
      seen.map((e) => e.id),
      all,
    )
    for (const e of seen) assert.match(e.cursor ?? '', /^\d+-\d+$/)
    assert.equal(cursor, seen[seen.length - 1]!.cursor)
    // Nothing new: an empty page hands the same cursor back.
    const empty = await page(`after=${cursor}`)
    assert.deepEqual(empty.items, [])
    assert.equal(empty.next_after, cursor)
    assert.equal(empty.next_before, null)
    // Resuming from an entry's own cursor gives what follows it.
    const resumed = await page(`after=${seen[0]!.cursor}&limit=200`)
    assert.deepEqual(
      resumed.items.map((e) => e.id),
      seen.slice(1).map((e) => e.id),
    )
    // Filters apply to forward pages too.
    const only = await page(`after=0-0&kind=export_b`)
    assert.deepEqual(
      only.items.map((e) => e.kind),
      ['export_b'],
    )
    // Backward pages carry no forward cursor.
    assert.equal((await page('limit=1')).next_after, null)
  })

  test('a bad cursor, or after with before, is 422', async () => {
    for (const q of [
      'after=abc',
      'after=12',
      'after=1-2-3',
      'after=-1-2',
      'after=0-0&before=5',
      'after=99999999999999999999-1',
    ]) {
      const res = await t.request({ method: 'GET', url: `/admin/audit?${q}`, token: root })
      assert.equal(res.statusCode, 422, q)
      assert.equal(res.json().detail[0].loc[0], 'query', q)
    }
  })

  test('paging while four writers commit: no entry missed or repeated', async () => {
    const start = (await drain('0-0', 200)).cursor
    let writing = true
    const writers = Array.from({ length: 4 }, (_, w) =>
      (async () => {
        for (let i = 0; i < 15; i++)
          await t.db.db.transaction().execute(async (tx) => {
            await tx
              .insertInto('audit_log')
              .values(row('concurrent', `w${w}`))
              .execute()
            // The transaction stays open a moment after its id was taken, so others commit past it.
            await sleep(Math.floor(Math.random() * 8))
            await tx
              .insertInto('audit_log')
              .values(row('concurrent', `w${w}`))
              .execute()
          })
      })(),
    )
    const done = Promise.all(writers).finally(() => {
      writing = false
    })
    const seen: Entry[] = []
    let cursor = start
    while (writing) {
      const p = await page(`after=${cursor}&limit=5`)
      seen.push(...p.items)
      cursor = p.next_after!
      // app.inject answers without I/O: give the writers' timers their turn.
      await sleep(3)
    }
    await done
    const concurrent = (s: Entry[]) => s.filter((e) => e.kind === 'concurrent')
    const rest = await drainUntil(cursor, 7, (s) => concurrent([...seen, ...s]).length >= 4 * 15 * 2)
    seen.push(...rest.seen)
    const written = (
      await t.db.db
        .selectFrom('audit_log')
        .select('id')
        .where('kind', '=', 'concurrent')
        .orderBy('id')
        .execute()
    ).map((r) => r.id)
    assert.equal(written.length, 4 * 15 * 2)
    const everyId = seen.map((e) => e.id)
    assert.equal(new Set(everyId).size, everyId.length, 'an entry was handed out twice')
    const ids = concurrent(seen).map((e) => e.id)
    assert.deepEqual(
      [...ids].sort((a, b) => a - b),
      written,
    )
  })

  if (backend.name.startsWith('postgres'))
    test('an entry whose transaction commits late is not passed: later ones wait for it (PostgreSQL)', async () => {
      const existing = (await allIds(t.db.db)).length
      const start = (await drainUntil('0-0', 200, (s) => s.length >= existing)).cursor
      let release = () => {}
      const gate = new Promise<void>((resolve) => {
        release = resolve
      })
      let inserted = () => {}
      const insertedYet = new Promise<void>((resolve) => {
        inserted = resolve
      })
      const late = t.db.db.transaction().execute(async (tx) => {
        await tx.insertInto('audit_log').values(row('late')).execute()
        inserted()
        await gate
      })
      await insertedYet
      await t.db.db.insertInto('audit_log').values(row('early')).execute()
      // 'early' is committed and visible, with a higher id than 'late', which is not yet: a cursor by
      // id would hand 'early' out now and never 'late'. The forward page holds 'early' back.
      const visible = await t.db.db
        .selectFrom('audit_log')
        .select(['id', 'kind'])
        .where('kind', 'in', ['late', 'early'])
        .execute()
      assert.deepEqual(
        visible.map((r) => r.kind),
        ['early'],
      )
      const held = await page(`after=${start}&limit=200`)
      assert.deepEqual(held.items, [])
      assert.equal(held.next_after, start)
      release()
      await late
      // Any write transaction of the cluster that began before 'early' holds it back until it ends (the
      // machine's other tests have such): settled soon, not at once.
      const { seen } = await drainUntil(start, 200, (s) => s.length >= 2)
      assert.deepEqual(
        seen.map((e) => e.kind),
        ['late', 'early'],
      )
      assert.ok(seen[0]!.id < seen[1]!.id)
    })
})

/** A SIEM-like receiver of the audit sink: answers 503, or drops the connection, while told to. */
async function startReceiver() {
  const lines: Record<string, unknown>[] = []
  const requests: { authorization?: string; contentType?: string; first?: unknown }[] = []
  let failing: 'no' | '503' | 'drop' = 'no'
  let failures = 0
  const server = http.createServer((req, res) => {
    let body = ''
    req.on('data', (d) => {
      body += d
    })
    req.on('end', () => {
      if (failing !== 'no') {
        failures++
        if (failing === 'drop') return req.socket.destroy()
        res.writeHead(503).end()
        return
      }
      const batch = body
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>)
      requests.push({
        authorization: req.headers.authorization,
        contentType: req.headers['content-type'],
        first: batch[0],
      })
      lines.push(...batch)
      res.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/ingest`,
    lines,
    requests,
    fail(mode: 'no' | '503' | 'drop') {
      failing = mode
    },
    failures: () => failures,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

eachBackend(httpBackends, 'audit sink (AUDIT_SINK_URL)', (backend) => {
  describe('sends every record once, through a failing receiver and a restart', () => {
    let p: ProvisionedBackend
    let receiver: Awaited<ReturnType<typeof startReceiver>>
    before(async () => {
      p = await backend.provision()
      receiver = await startReceiver()
    })
    after(async () => {
      await receiver.close()
      await p.dispose()
    })

    test('sink', async () => {
      const env = {
        AUDIT_SINK_URL: receiver.url,
        AUDIT_SINK_AUTHORIZATION: 'Bearer sink-token-1234',
        AUDIT_SINK_POLL_MS: '20',
        JOBS_POLL_MS: '20',
      }
      receiver.fail('503')
      let t = await startApp(backend, env, p)
      /**
       * Moves the test clock to the sink's next run when it waits (a back-off), so it is due. Only that
       * far: a bigger step would also end the lease of a run in progress and start a second one.
       */
      const nudge = async () => {
        const next = await t.db.db
          .selectFrom('jobs')
          .select('run_at')
          .where('kind', '=', 'audit-sink')
          .where('done_at', 'is', null)
          .where('locked_until', 'is', null)
          .executeTakeFirst()
        if (next && next.run_at > t.clock.now()) t.clock.advance(next.run_at - t.clock.now() + 1)
        return false
      }
      try {
        // A refused sign-in writes its record as a user would cause it; more are written directly.
        const bad = await t.request({
          method: 'POST',
          url: '/auth/login',
          payload: { email: 'nobody@example.com', password: 'not-the-password' },
        })
        assert.equal(bad.statusCode, 401)
        await t.db.db
          .insertInto('audit_log')
          .values([row('sink_1'), row('sink_2')])
          .execute()
        await until('three refused deliveries', async () => receiver.failures() >= 3 || (await nudge()))
        receiver.fail('drop')
        await until('two dropped deliveries', async () => receiver.failures() >= 5 || (await nudge()))
        assert.equal(receiver.lines.length, 0)
        const state = await t.db.db.selectFrom('audit_sink').selectAll().executeTakeFirstOrThrow()
        assert.ok(state.failures >= 1)
        assert.equal(state.after_id, 0, 'nothing was acknowledged')

        receiver.fail('no')
        const everything = async () => {
          await nudge()
          const ids = await allIds(t.db.db)
          return ids.every((id) => receiver.lines.some((l) => l.id === id))
        }
        await until('every record delivered', everything)
        assert.ok(receiver.lines.some((l) => l.kind === 'login' && l.outcome === 'failure'))
        assert.equal(receiver.requests[0]!.authorization, 'Bearer sink-token-1234')
        assert.equal(receiver.requests[0]!.contentType, 'application/x-ndjson')
        for (const l of receiver.lines) assert.match(String(l.cursor), /^\d+-\d+$/)
      } finally {
        await t.close()
      }

      // Written while no instance runs.
      const db = await openDatabase(p.env.DATABASE_URL!, { schema: p.env.DATABASE_SCHEMA })
      try {
        await db.db
          .insertInto('audit_log')
          .values([row('while_down_1'), row('while_down_2')])
          .execute()
      } finally {
        await db.close()
      }
      const before = receiver.lines.length
      t = await startApp(backend, env, p)
      try {
        await until('the records written while down', async () => {
          await nudge()
          const ids = await allIds(t.db.db)
          return ids.every((id) => receiver.lines.some((l) => l.id === id))
        })
        // Sent on from the acknowledged cursor: the first line after the restart is the first new record.
        const resumed = receiver.lines.slice(before)
        assert.equal(resumed[0]!.kind, 'while_down_1')
        const ids = receiver.lines.map((l) => l.id)
        assert.equal(new Set(ids).size, ids.length, 'a record was sent twice')
        assert.deepEqual(
          [...ids].sort((a, b) => Number(a) - Number(b)),
          await allIds(t.db.db),
        )
        // The cursor is stored once the receiver's answer arrived: just after the lines did.
        const last = receiver.lines[receiver.lines.length - 1]!.cursor
        await until('the last cursor acknowledged', async () => {
          const state = await t.db.db.selectFrom('audit_sink').selectAll().executeTakeFirstOrThrow()
          return state.failures === 0 && `${state.after_tx}-${state.after_id}` === last
        })
      } finally {
        await t.close()
      }
    })
  })
})
