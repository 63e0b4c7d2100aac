import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sql } from 'kysely'
import { startApp, TEST_SECRET } from '../../../test/helpers/app.js'
import { eachBackend, httpBackends, useDatabase } from '../../../test/helpers/backends.js'
import { wristband } from '../../../test/helpers/cli.js'
import { migrationNames } from './migrations/index.js'

// What release N+1 leaves behind when it is rolled back to release N: a migration N does not know.
const NEWER = '999-from-the-next-release'

eachBackend(httpBackends, 'migrations of a newer release', (backend) => {
  // Unmigrated: the tests apply the migrations, and one of a newer release, themselves.
  const database = useDatabase(backend, { migrate: false })
  const env = () => ({ JWT_SECRET: TEST_SECRET, ...database.env() })

  test('migrate --status on an empty database lists every migration as pending and applies none', async () => {
    const run = await wristband(['migrate', '--status'], env())
    assert.equal(run.code, 0, run.stderr)
    const lines = run.stdout.trim().split('\n')
    assert.deepEqual(
      lines.map((l) => l.split(/\s+/).at(-1)),
      migrationNames(),
    )
    assert.ok(
      lines.every((l) => l.startsWith('pending')),
      run.stdout,
    )
    assert.deepEqual(await database.handle().pendingMigrations(), migrationNames())
  })

  test('an instance starts on a database migrated by the next release (rollback), warning about it', async () => {
    await database.handle().migrate()
    await sql`insert into kysely_migration (name, timestamp) values (${NEWER}, ${new Date().toISOString()})`.execute(
      database.handle().db,
    )
    const t = await startApp(backend, {}, { env: database.env(), dispose: async () => {} })
    try {
      const warning = t.logs.find((l) => l.includes('migrations of a newer release'))
      assert.ok(warning?.includes(NEWER), t.logs.join(''))
      const ready = await t.request({ method: 'GET', url: '/ready' })
      assert.equal(ready.statusCode, 200, ready.body)
    } finally {
      await t.close()
    }
    const run = await wristband(['migrate'], env())
    assert.equal(run.code, 0, run.stderr)
  })

  test('migrate --status shows applied migrations and the one this release does not know', async () => {
    const run = await wristband(['migrate', '--status'], env())
    assert.equal(run.code, 0, run.stderr)
    const lines = run.stdout.trim().split('\n')
    assert.equal(lines.length, migrationNames().length + 1, run.stdout)
    for (const name of migrationNames())
      assert.match(run.stdout, new RegExp(`^applied \\d{4}-\\d\\d-\\d\\dT\\S+\\s+${name}$`, 'm'))
    assert.match(lines.at(-1)!, new RegExp(`^applied .*${NEWER}  \\(applied by a newer release`))
  })

  test('an instance refuses to start when a migration it needs is missing under a newer one', async () => {
    const last = migrationNames().at(-1)!
    await sql`delete from kysely_migration where name = ${last}`.execute(database.handle().db)
    await assert.rejects(
      startApp(backend, {}, { env: database.env(), dispose: async () => {} }),
      /migrations \(999-from-the-next-release\) of a newer release that lack one this release needs/,
    )
  })
})
