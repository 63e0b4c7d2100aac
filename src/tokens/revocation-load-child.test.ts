import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { before, test } from 'node:test'
import { forEachBackend, startApp, type TestApp } from '../../test/helpers/app.js'
import { backends, eachBackend } from '../../test/helpers/backends.js'
import { runOrphaned } from '../../test/helpers/orphan-child.js'
import { silentPostgres } from '../../test/helpers/silent-postgres.js'
import { relayedDatabase } from '../../test/helpers/tcp-relay.js'
import { until } from '../../test/helpers/until.js'
import { ACCOUNT_PREFIX } from './claims.js'
import { memoryRevocations, REVOCATION_PAGE, type RevocationLoadRequest } from './revocations.js'
import { insertRevocations, liveRevocationLines } from './revocations.store.js'

/**
 * The revocation list's load child (revocation-load.process.ts) whose service is gone before it
 * answered: a killed or crashed service closes its channel, and the child must neither read on for
 * no one (its own connection) nor leave its file of arrays in DATA_DIR, where every crash would add one.
 */
forEachBackend(backends, 'the revocation load child of a service that is gone', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    const now = t.clock.now()
    const entries = Array.from({ length: REVOCATION_PAGE + 1 }, (_, i) => ({
      jti: `orphan-${i}`,
      expiresAt: now + 3_600_000,
    }))
    for (let i = 0; i < entries.length; i += 1000)
      await insertRevocations(t.db.db, now, entries.slice(i, i + 1000))
  })

  test('a load child whose service closed its channel ends and leaves no file in DATA_DIR', async () => {
    const file = path.join(t.config.DATA_DIR, `revocations-orphan-${process.pid}.load`)
    const request: RevocationLoadRequest = {
      url: t.config.databaseUrl,
      schema: t.config.DATABASE_SCHEMA,
      now: t.clock.now(),
      pageSize: REVOCATION_PAGE,
      prefix: ACCOUNT_PREFIX,
      first: await liveRevocationLines(t.db.db, { expiresAt: t.clock.now(), jti: '' }, REVOCATION_PAGE),
      file,
    }
    // The service gone: its end of the channel closes with the message sent.
    await runOrphaned(new URL('./revocation-load.process.js', import.meta.url), request)
    assert.equal(fs.existsSync(file), false, 'the file of arrays was left behind')
  })
  test('a starting instance deletes the load files a killed service left in DATA_DIR ten minutes ago or more, no other', async () => {
    // A service killed between its child's answer and its own deletion of the file left it; pids cannot
    // tell whether its owner still runs (they repeat in containers), its age can: a load's file lives
    // seconds.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-load-'))
    const file = (name: string, agoMs: number) => {
      const at = new Date(Date.now() - agoMs)
      fs.writeFileSync(path.join(dir, name), 'x', { mode: 0o600 })
      fs.utimesSync(path.join(dir, name), at, at)
      return path.join(dir, name)
    }
    const left = file('revocations-1-0123456789ab.load', 11 * 60_000)
    const loading = file('revocations-1-ba9876543210.load', 0)
    const other = file('edge-key.pem', 11 * 60_000)
    const store = memoryRevocations({
      db: t.db.db,
      clock: t.clock,
      log: t.app.log,
      database: { url: t.config.databaseUrl, schema: t.config.DATABASE_SCHEMA, dir },
    })
    const loaded = () => t.logs.filter((l) => l.includes('revocations loaded')).length
    const before = loaded()
    try {
      await store.start()
      assert.equal(fs.existsSync(left), false, "the killed service's file is left")
      assert.equal(fs.existsSync(loading), true, "a loading instance's file")
      assert.equal(fs.existsSync(other), true, 'another file of DATA_DIR')
      assert.ok(
        t.logs.some((l) => l.includes('deleted revocation load files') && l.includes(path.basename(left))),
      )
      await until('the list loaded', () => loaded() === before + 1)
    } finally {
      store.stop()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
  test('a load child that does not answer in its time is ended, and the instance reads the list itself', async () => {
    // A database that lets the child in and never answers its queries: the child waits on it for good.
    const silent = await silentPostgres()
    const store = memoryRevocations({
      db: t.db.db,
      clock: t.clock,
      log: t.app.log,
      database: {
        url: silent.url,
        schema: 'public',
        dir: t.config.DATA_DIR,
        timeoutMs: 500,
      },
    })
    const loadedHere = () =>
      t.logs.filter((l) => l.includes('revocations loaded') && l.includes('this process')).length
    const before = loadedHere()
    try {
      await store.start()
      await until('the list read in this process', () => loadedHere() === before + 1)
      assert.ok(
        t.logs.some((l) => l.includes('could not load the revocations') && l.includes('did not answer')),
        'the ended child is logged',
      )
      for (const jti of ['orphan-0', `orphan-${REVOCATION_PAGE}`])
        assert.equal(await store.isRevoked(jti), true, jti)
    } finally {
      store.stop()
      silent.close()
    }
  })
})

// What the child reads is counted on its connection, through a relay: PostgreSQL's (SQLite's child opens
// the file). The code is the same on both.
eachBackend(
  backends.filter((b) => b.name.startsWith('postgres')),
  'the revocation load reads each page once',
  (backend) => {
    test("a list longer than a page: the child reads on after the instance's first page, not from the start", async () => {
      const t = await startApp(backend)
      const { relay, url } = await relayedDatabase(t.config.databaseUrl)
      const now = t.clock.now()
      const jti = (i: number) => `page-once-${String(i).padStart(40, '0')}`
      const entries = Array.from({ length: REVOCATION_PAGE + 1 }, (_, i) => ({
        jti: jti(i),
        expiresAt: now + 3_600_000,
      }))
      for (let i = 0; i < entries.length; i += 1000)
        await insertRevocations(t.db.db, now, entries.slice(i, i + 1000))
      const store = memoryRevocations({
        db: t.db.db,
        clock: t.clock,
        log: t.app.log,
        database: { url, schema: t.config.DATABASE_SCHEMA, dir: t.config.DATA_DIR },
      })
      const byChild = () =>
        t.logs.filter((l) => l.includes('revocations loaded') && l.includes('a child process'))
      const before = byChild().length
      try {
        await store.start()
        await until('the list loaded by the child', () => byChild().length === before + 1)
        // Every revocation once: the instance's first page, handed to the child, and the one after it.
        assert.match(byChild().at(-1)!, new RegExp(`"revocations":${REVOCATION_PAGE + 1}[,}]`))
        for (const i of [0, REVOCATION_PAGE - 1, REVOCATION_PAGE])
          assert.equal(await store.isRevoked(jti(i)), true, jti(i))
        // A page of these is over 500 kB; the child read the one revocation after it (and its
        // connection's set-up).
        assert.ok(relay.received < 100_000, `the child read ${relay.received} bytes`)
      } finally {
        store.stop()
        await relay.cut()
        await t.close()
      }
    })
  },
)
