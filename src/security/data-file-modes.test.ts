// The SQLite database (with its -wal and -shm files) and `wristband backup` files
// hold password hashes and sealed secrets; another account on the machine must not read them, even
// under a permissive umask (the systemd unit sets UMask=0077 as well).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { login, STANDARD_SEED, startApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { wristband } from '../../test/helpers/cli.js'

const [sqlite] = httpBackends

const modeOf = (file: string) => fs.statSync(file).mode & 0o777

test('the database and backups are created 0600', async () => {
  const previous = process.umask(0o022)
  const p = await sqlite!.provision()
  try {
    // A folder the service creates itself, under the usual umask that makes files world-readable.
    const dataDir = path.join(p.env.DATA_DIR!, 'state')
    const dbFile = path.join(dataDir, 'wristband.db')
    const t = await startApp(
      sqlite!,
      { DATA_DIR: dataDir, DATABASE_URL: `sqlite:${dbFile}`, JWT_SECRET: '' },
      p,
    )
    try {
      await t.seed(STANDARD_SEED)
      await login(t, 'root@example.com')
      for (const file of [dbFile, `${dbFile}-wal`, `${dbFile}-shm`, path.join(dataDir, 'jwt-secret')])
        assert.equal(modeOf(file).toString(8), '600', file)
      assert.equal(modeOf(dataDir).toString(8), '700', dataDir)

      const backup = path.join(p.env.DATA_DIR!, 'backup.db')
      const keys = path.join(p.env.DATA_DIR!, 'keys')
      const run = await wristband(['backup', backup, '--keys', keys], {
        DATA_DIR: dataDir,
        DATABASE_URL: `sqlite:${dbFile}`,
      })
      assert.equal(run.code, 0, run.stderr)
      assert.equal(modeOf(backup).toString(8), '600', backup)
      for (const key of ['jwt-secret', 'edge-key.pem'])
        assert.equal(modeOf(path.join(keys, key)).toString(8), '600', key)
      assert.equal(modeOf(keys).toString(8), '700', keys)
    } finally {
      await t.close()
    }
  } finally {
    process.umask(previous)
    await p.dispose()
  }
})

test('the systemd unit sets UMask=0077', () => {
  const unit = fs.readFileSync(new URL('../../deploy/wristband.service', import.meta.url), 'utf8')
  const service = unit.slice(unit.indexOf('[Service]'), unit.indexOf('[Install]'))
  assert.match(service, /^UMask=0077$/m)
})
