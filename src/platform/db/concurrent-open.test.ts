import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { httpBackends, type ProvisionedBackend } from '../../../test/helpers/backends.js'
import { type DatabaseHandle, openDatabase } from './database.js'

const postgres = httpBackends.find((b) => b.name.startsWith('postgres'))!

// Instances of a fleet start at the same moment on a schema nobody has created yet, and `wristband
// migrate` may run beside them: every one of them must come up on the one schema they all created.
describe(
  'several processes opening one new schema at once [postgres]',
  postgres.skip ? { skip: postgres.skip } : {},
  () => {
    let p: ProvisionedBackend
    const handles: DatabaseHandle[] = []
    before(async () => {
      p = await postgres.provision()
    })
    after(async () => {
      await Promise.all(handles.map((h) => h.close()))
      await p.dispose()
    })

    test('all of them open and migrate it; the migrations are applied once', async () => {
      const schema = p.env.DATABASE_SCHEMA!
      const opened = await Promise.allSettled(
        Array.from({ length: 8 }, async () => {
          const h = await openDatabase(p.env.DATABASE_URL!, { schema, poolSize: 2 })
          handles.push(h)
          await h.migrate()
          return h
        }),
      )
      const failed = opened.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []))
      assert.deepEqual(failed, [])
      assert.deepEqual(await handles[0]!.pendingMigrations(), [])
    })
  },
)
