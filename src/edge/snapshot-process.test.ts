import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { before, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { backends } from '../../test/helpers/backends.js'
import { runOrphaned } from '../../test/helpers/orphan-child.js'
import { newTicketType, newTransfer, type PartnerKeys, seedPartner } from '../../test/helpers/partner.js'
import { silentPostgres } from '../../test/helpers/silent-postgres.js'
import { waitFor } from '../../test/helpers/until.js'
import type { SnapshotProcessJob } from './snapshot-file.js'
import { type HeldPage, Snapshots } from './snapshots.js'

/**
 * A first-sync snapshot's build child (snapshot-process.ts) whose service is gone: a killed or crashed
 * service closes its channel, and nobody will read the snapshot. The child must not read and write on
 * for no one, nor leave the snapshot's file behind, where every crash would add one. A child stuck on
 * its database is ended; and a child whose service is busy answering the gate waits before each page.
 */
forEachBackend(backends, 'the snapshot build child: its service gone, busy, or its database stuck', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
  })

  test('a build child whose service closed its channel ends and deletes the snapshot file', async () => {
    const file = path.join(t.config.DATA_DIR, `snapshot-orphan-${process.pid}.pages`)
    fs.writeFileSync(file, '', { mode: 0o600, flag: 'wx' })
    const job: SnapshotProcessJob = {
      eventId: 1,
      position: 0,
      keyIds: [],
      pageSize: 1,
      busyStep: 1,
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

  test("a build reads each page once the service is quiet, not while the gate's requests are answered", async () => {
    const ticket = await newTicketType(t, keys.write)
    for (let i = 0; i < 3; i++) await newTransfer(t, keys.write, ticket)
    let asks = 0
    let goQuiet!: () => void
    const quiet = new Promise<boolean>((resolve) => {
      goQuiet = () => resolve(false)
    })
    const snapshots = new Snapshots({
      db: t.db.db,
      clock: t.clock,
      databaseUrl: t.config.databaseUrl,
      schema: t.config.DATABASE_SCHEMA,
      dataDir: t.config.DATA_DIR,
      keyIds: () => [],
      pageSize: 1,
      quiet: () => {
        asks++
        return quiet
      },
    })
    let first: HeldPage | undefined | 'waiting' = 'waiting'
    try {
      const asked = snapshots.page(1, undefined, 0, undefined).then((page) => {
        first = page
      })
      await waitFor(() => asks === 1, 30_000, "the build's first ask")
      // The service never went quiet: the build waits before its first page, and no scanner has it.
      await sleep(200)
      assert.equal(asks, 1)
      assert.equal(first, 'waiting')
      goQuiet()
      await asked
      assert.ok(first !== undefined && first !== 'waiting', 'the first page, once the service was quiet')
      ;(first as HeldPage).release()
      // One ask a read: the three tickets' (a page of one ticket each, the last one without more), each
      // asked while the read before it ran (the service was quiet), so one more after the last read.
      await waitFor(() => asks === 4, 30_000, 'an ask for each page')
      await sleep(200)
      assert.equal(asks, 4, 'no ask once the build ended')
    } finally {
      await snapshots.close()
    }
  })
})
