import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { before, test } from 'node:test'
import { forEachBackend, STANDARD_SEED, startApp, type TestApp } from '../../test/helpers/app.js'
import { backends, eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { until } from '../../test/helpers/until.js'
import { Snapshots } from './snapshots.js'

/**
 * The snapshot folders of an instance that did not stop (kill -9, a crash): its own cleanup never ran,
 * and pids cannot tell whether it still runs (they repeat in containers; a DATA_DIR may be shared across
 * pid namespaces). A running instance marks its folder (mtime) on each sweep; any instance deletes, at
 * start and on each sweep, the folders nobody marked in ten sweeps (ten minutes).
 */
const ELEVEN_MINUTES_AGO = () => new Date(Date.now() - 11 * 60_000)

/** A folder under `root` with a snapshot file in it, last marked at `at`. */
function instanceFolder(root: string, name: string, at: Date): string {
  const folder = path.join(root, name)
  fs.mkdirSync(folder, { recursive: true, mode: 0o700 })
  fs.writeFileSync(path.join(folder, '1-0-00000000.pages'), 'x', { mode: 0o600 })
  fs.utimesSync(folder, at, at)
  return folder
}

eachBackend(httpBackends, 'scan-sync: the leftovers of an instance that did not stop', (backend) => {
  test("a starting instance deletes the snapshot folders nobody marked in ten minutes, and not a running instance's", async () => {
    const storage = await backend.provision()
    try {
      const root = path.join(storage.env.DATA_DIR!, 'scan-sync')
      const killed = instanceFolder(root, '1-killed', ELEVEN_MINUTES_AGO())
      const running = instanceFolder(root, '1-running', new Date())
      const t = await startApp(backend, {}, storage)
      // Closing waits for the look the start began.
      await t.close()
      assert.equal(fs.existsSync(killed), false, "the killed instance's folder is left")
      assert.equal(
        fs.existsSync(path.join(running, '1-0-00000000.pages')),
        true,
        "a running instance's folder",
      )
    } finally {
      await storage.dispose()
    }
  })
})

forEachBackend(backends, 'scan-sync: a running instance keeps its snapshot folder', (ctx) => {
  let t: TestApp
  before(async () => {
    t = ctx()
    await t.seed(STANDARD_SEED)
  })

  test('an instance marks its own folder on each sweep, so that another one sharing DATA_DIR leaves it', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-snapshots-'))
    const instance = (sweepMs?: number) =>
      new Snapshots({
        db: t.db.db,
        clock: t.clock,
        databaseUrl: t.config.databaseUrl,
        schema: t.config.DATABASE_SCHEMA,
        dataDir,
        keyIds: () => [],
        pageSize: 10,
        ...(sweepMs ? { sweepMs } : {}),
      })
    const running = instance(50)
    try {
      assert.ok(await running.page(1, undefined, 0, undefined), 'a snapshot page')
      const root = path.join(dataDir, 'scan-sync')
      const [own] = fs.readdirSync(root)
      const folder = path.join(root, own!)
      // Not marked in eleven minutes, as if its sweeps had not run: the next one marks it again.
      fs.utimesSync(folder, ELEVEN_MINUTES_AGO(), ELEVEN_MINUTES_AGO())
      await until('the folder marked', () => fs.statSync(folder).mtimeMs > Date.now() - 60_000)
      const starting = instance()
      await starting.close()
      assert.deepEqual(fs.readdirSync(root), [own], 'the running instance keeps its folder')
      assert.ok(await running.page(1, undefined, 0, undefined), 'and its snapshot')
    } finally {
      await running.close()
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
