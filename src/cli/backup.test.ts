import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { login, STANDARD_SEED, startApp, TEST_SECRET, type TestApp } from '../../test/helpers/app.js'
import { httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { wristband } from '../../test/helpers/cli.js'

const [sqlite] = httpBackends

describe('wristband backup FILE (SQLite)', () => {
  let p: ProvisionedBackend
  let running: TestApp
  let restored: TestApp | undefined
  before(async () => {
    p = await sqlite!.provision()
    running = await startApp(sqlite!, {}, p)
    await running.seed(STANDARD_SEED)
  })
  after(async () => {
    await restored?.close()
    await running?.close()
    await p?.dispose()
  })

  test('a backup taken while the service writes restores into a service that has every write', async () => {
    // Written through the running service, so the latest pages sit in the WAL file, not the main one.
    const admin = await login(running, 'ev1@example.com')
    const created = await running.request({
      method: 'POST',
      url: '/tokens/api-key',
      token: admin.access_token,
      payload: { event_id: 1, name: 'before the backup', scopes: ['api:read'] },
    })
    assert.equal(created.statusCode, 200, created.body)
    const key = created.json().api_key as string

    const file = path.join(p.env.DATA_DIR!, 'backup', 'wristband-backup.db')
    fs.mkdirSync(path.dirname(file))
    const env = { ...p.env, JWT_SECRET: TEST_SECRET }
    const run = await wristband(['backup', file], env)
    assert.equal(run.code, 0, run.stderr)
    assert.match(run.stdout, /backed up .* to .*wristband-backup\.db/)
    // Not overwritten by a second run.
    const again = await wristband(['backup', file], env)
    assert.equal(again.code, 2)
    assert.match(again.stderr, /exists already/)

    // Restore: a service on the copy alone (no -wal beside it), with the same signing secret.
    assert.ok(!fs.existsSync(`${file}-wal`) || fs.statSync(`${file}-wal`).size === 0)
    restored = await startApp(
      sqlite!,
      { DATA_DIR: path.dirname(file), DATABASE_URL: `sqlite:${file}` },
      {
        env: {},
        dispose: async () => {},
      },
    )
    const signedIn = await login(restored, 'ev1@example.com')
    assert.ok(signedIn.access_token)
    const verified = await restored.request({
      method: 'POST',
      url: '/tokens/verify',
      payload: { token: key },
    })
    assert.equal(verified.json().valid, true, 'the API key written just before the backup is in it')
  })

  test('refused for PostgreSQL and for a missing FILE argument, with one line', async () => {
    const pg = await wristband(['backup', 'x.db'], {
      JWT_SECRET: TEST_SECRET,
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/x',
    })
    assert.equal(pg.code, 2)
    assert.match(pg.stderr, /pg_dump/)
    const none = await wristband(['backup'], { JWT_SECRET: TEST_SECRET })
    assert.equal(none.code, 2)
    assert.match(none.stderr, /give the FILE/)
  })
})
