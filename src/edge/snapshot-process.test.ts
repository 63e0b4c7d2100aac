import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { before, test } from 'node:test'
import { forEachBackend, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { backends } from '../../test/helpers/backends.js'
import { runOrphaned } from '../../test/helpers/orphan-child.js'
import { silentPostgres } from '../../test/helpers/silent-postgres.js'
import type { SnapshotProcessJob } from './snapshot-file.js'
import { Snapshots } from './snapshots.js'

/**
 * A first-sync snapshot's build child (snapshot-process.ts) whose service is gone: a killed or crashed
 * service closes its channel, and nobody will read the snapshot. The child must not read and write on
 * for no one, nor leave the snapshot's file behind, where every crash would add one.
 */
forEachBackend(backends, 'the snapshot build child of a service that is gone', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
  })

  test('a build child whose service closed its channel ends and deletes the snapshot file', async () => {
    const file = path.join(t.config.DATA_DIR, `snapshot-orphan-${process.pid}.pages`)
    fs.writeFileSync(file, '', { mode: 0o600, flag: 'wx' })
    const job: SnapshotProcessJob = {
      eventId: 1,
      position: 0,
      keyIds: [],
      pageSize: 1,
      file,
      databaseUrl: t.config.databaseUrl,
      schema: t.config.DATABASE_SCHEMA,
    }
    // The service gone: its end of the channel closes with the message sent.
    await runOrphaned(new URL('./snapshot-process.js', import.meta.url), job)
    assert.equal(fs.existsSync(file), false, "the snapshot's file was left behind")
  })
  test('a build that writes no page in its time is ended, and the first sync is read from the database', {
    timeout: 60_000,
  }, async () => {
    // A database that lets the child in and never answers its queries: the child waits on it for good.
    const silent = await silentPostgres()
    const snapshots = new Snapshots({
      db: t.db.db,
      clock: t.clock,
      databaseUrl: silent.url,
      schema: 'public',
      dataDir: t.config.DATA_DIR,
      keyIds: () => [],
      pageSize: 10,
      pageTimeoutMs: 500,
    })
    try {
      // Undefined: no snapshot page, the caller reads the page from the database.
      assert.equal(await snapshots.page(1, undefined, 0, undefined), undefined)
    } finally {
      await snapshots.close()
      silent.close()
    }
  })
})
