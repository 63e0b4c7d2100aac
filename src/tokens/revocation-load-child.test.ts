import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { backends } from '../../test/helpers/backends.js'
import { runOrphaned } from '../../test/helpers/orphan-child.js'
import { silentPostgres } from '../../test/helpers/silent-postgres.js'
import { until } from '../../test/helpers/until.js'
import { ACCOUNT_PREFIX } from './claims.js'
import { memoryRevocations, REVOCATION_PAGE, type RevocationLoadRequest } from './revocations.js'
import { insertRevocations } from './revocations.store.js'

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
      file,
    }
    // The service gone: its end of the channel closes with the message sent.
    await runOrphaned(new URL('./revocation-load.process.js', import.meta.url), request)
    assert.equal(fs.existsSync(file), false, 'the file of arrays was left behind')
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
