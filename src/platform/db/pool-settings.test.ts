import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { sql } from 'kysely'
import { httpBackends, type ProvisionedBackend } from '../../../test/helpers/backends.js'
import { loadConfig } from '../config.js'
import { type DatabaseHandle, openDatabase, servicePoolOptions } from './database.js'

const postgres = httpBackends.find((b) => b.name.startsWith('postgres'))!

describe('PostgreSQL pool settings [postgres]', postgres.skip ? { skip: postgres.skip } : {}, () => {
  let p: ProvisionedBackend
  let handle: DatabaseHandle
  before(async () => {
    p = await postgres.provision()
    const config = loadConfig({
      ...p.env,
      DATABASE_POOL_SIZE: '2',
      DATABASE_STATEMENT_TIMEOUT_SECONDS: '1',
    })
    handle = await openDatabase(config.databaseUrl, servicePoolOptions(config))
  })
  after(async () => {
    await handle.close()
    await p.dispose()
  })

  test('DATABASE_POOL_SIZE bounds the connections one process opens', async () => {
    const pids = await Promise.all(
      Array.from({ length: 6 }, () =>
        sql<{ pid: number }>`select pg_backend_pid() as pid, pg_sleep(0.05)`.execute(handle.db),
      ),
    )
    const distinct = new Set(pids.map((r) => r.rows[0]!.pid))
    assert.ok(distinct.size <= 2, `${distinct.size} connections`)
  })

  test('DATABASE_STATEMENT_TIMEOUT_SECONDS makes the server cancel a longer statement', async () => {
    await assert.rejects(sql`select pg_sleep(30)`.execute(handle.db), { code: '57014' })
  })
})
