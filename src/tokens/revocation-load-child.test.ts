import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { before, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { backends } from '../../test/helpers/backends.js'
import { runOrphaned } from '../../test/helpers/orphan-child.js'
import { ACCOUNT_PREFIX } from './claims.js'
import { REVOCATION_PAGE, type RevocationLoadRequest } from './revocations.js'
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
})
