import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { TEST_SECRET } from '../test/helpers/app.js'
import { httpBackends, type ProvisionedBackend } from '../test/helpers/backends.js'
import { wristband } from '../test/helpers/cli.js'
import { openDatabase } from './platform/db/database.js'

const SEED = {
  events: [{ id: 1, uid: 'cli-fest', name: 'CLI Fest', timezone: 'Europe/Berlin' }],
  administrators: [{ email: 'Root@Example.com', password: 's3cret-pass', role: 'superadmin', event_ids: [] }],
  operators: [{ email: 'op@example.com', password: 's3cret-pass', event_id: 1, mode: 0, permissions: null }],
  devices: [
    {
      dev_mac: 'AA:BB:CC:DD:EE:01',
      event_id: 1,
      operator_email: 'op@example.com',
      device_key: 'wbd_seeded-cli-device-key-0123456789',
    },
  ],
}

// Each case runs its own processes on its own data: they run side by side.
describe('wristband command line', { concurrency: true }, () => {
  test('--help prints the usage and exits 0; no command exits non-zero', async () => {
    const [help, none, unknown] = await Promise.all([
      wristband(['--help'], {}),
      wristband([], {}),
      wristband(['frobnicate'], {}),
    ])
    assert.equal(help.code, 0)
    for (const word of ['serve', 'migrate', 'seed FILE|-']) assert.ok(help.stdout.includes(word), word)
    assert.notEqual(none.code, 0)
    assert.notEqual(unknown.code, 0)
    assert.match(unknown.stderr, /unknown command "frobnicate"/)
  })

  test('bad configuration: one clear line per bad value, all at once, and a non-zero exit', async () => {
    const res = await wristband(['migrate'], {
      PORT: 'eighty',
      LOG_LEVEL: 'loud',
      JWT_SECRET: 'too-short',
      ACCESS_TOKEN_EXPIRE_MINUTES: '0',
    })
    assert.notEqual(res.code, 0)
    const lines = res.stderr.split('\n').filter((l) => l.trim().startsWith('- '))
    assert.equal(lines.length, 4, res.stderr)
    for (const name of ['PORT', 'LOG_LEVEL', 'JWT_SECRET', 'ACCESS_TOKEN_EXPIRE_MINUTES'])
      assert.equal(lines.filter((l) => l.includes(`${name}:`)).length, 1, `${name} in:\n${res.stderr}`)
    assert.ok(!res.stderr.includes('    at '), 'no stack trace')
  })

  test('an invalid seed document is refused with its problems and changes nothing', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-cli-data-'))
    try {
      const env = { DATA_DIR: dir, JWT_SECRET: TEST_SECRET }
      const notJson = await wristband(['seed', '-'], env, '{ nope')
      assert.notEqual(notJson.code, 0)
      assert.match(notJson.stderr, /not JSON/)
      const bad = await wristband(['seed', '-'], env, JSON.stringify({ administrators: [{ email: 'x' }] }))
      assert.notEqual(bad.code, 0)
      assert.match(bad.stderr, /invalid seed document/)
      assert.match(bad.stderr, /\/administrators\/0/)
      assert.ok(!fs.existsSync(path.join(dir, 'wristband.db')), 'refused before touching the database')
      assert.ok(!bad.stderr.includes('    at '), 'no stack trace')
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  for (const backend of httpBackends) {
    describe(`migrate and seed [${backend.name}]`, backend.skip ? { skip: backend.skip } : {}, () => {
      let p: ProvisionedBackend
      let env: Record<string, string>
      before(async () => {
        p = await backend.provision()
        env = { ...p.env, JWT_SECRET: TEST_SECRET }
      })
      after(async () => {
        await p?.dispose()
      })

      // Runs first; the seed runs below migrate the same database again, so a second run is covered.
      test('migrate creates the schema', async () => {
        const res = await wristband(['migrate'], env)
        assert.equal(res.code, 0, res.stderr)
        assert.match(res.stdout, /migrations applied/)
        const h = await openDatabase(p.env.DATABASE_URL!, { schema: p.env.DATABASE_SCHEMA ?? 'public' })
        try {
          assert.deepEqual(await h.pendingMigrations(), [])
        } finally {
          await h.close()
        }
      })

      test('seed FILE and seed -: the document comes back with ids; a re-run updates, never duplicates', async () => {
        const file = path.join(p.env.DATA_DIR!, 'seed.json')
        fs.writeFileSync(file, JSON.stringify(SEED))
        const first = await wristband(['seed', file], env)
        assert.equal(first.code, 0, first.stderr)
        const out = JSON.parse(first.stdout)
        assert.equal(out.events[0].id, 1)
        assert.ok(Number.isInteger(out.administrators[0].id))
        assert.ok(Number.isInteger(out.operators[0].id))
        assert.ok(Number.isInteger(out.devices[0].id))
        assert.equal(out.administrators[0].email, 'Root@Example.com', 'the document is echoed as given')
        assert.doesNotMatch(first.stdout, /s3cret-pass|password/, 'no password is printed')
        assert.doesNotMatch(first.stdout, /wbd_|device_key/, 'no device key is printed')

        const changed = structuredClone(SEED)
        changed.events[0]!.name = 'CLI Fest, renamed'
        changed.operators[0]!.mode = 3
        const second = await wristband(['seed', '-'], env, JSON.stringify(changed))
        assert.equal(second.code, 0, second.stderr)
        const again = JSON.parse(second.stdout)
        assert.equal(again.administrators[0].id, out.administrators[0].id)
        assert.equal(again.operators[0].id, out.operators[0].id)
        assert.equal(again.devices[0].id, out.devices[0].id)

        const h = await openDatabase(p.env.DATABASE_URL!, { schema: p.env.DATABASE_SCHEMA ?? 'public' })
        try {
          const count = async (table: 'administrators' | 'users' | 'devices' | 'events') =>
            Number(
              (
                await h.db
                  .selectFrom(table)
                  .select((eb) => eb.fn.countAll().as('n'))
                  .executeTakeFirstOrThrow()
              ).n,
            )
          assert.equal(await count('administrators'), 1)
          assert.equal(await count('users'), 1)
          assert.equal(await count('devices'), 1)
          assert.equal(await count('events'), 1)
          const ev = await h.db.selectFrom('events').select('name').executeTakeFirstOrThrow()
          assert.equal(ev.name, 'CLI Fest, renamed')
          const op = await h.db
            .selectFrom('users')
            .select(['mode', 'password_hash'])
            .executeTakeFirstOrThrow()
          assert.equal(op.mode, 3)
          assert.match(op.password_hash, /^\$argon2id\$/, 'stored hashed')
          const admin = await h.db.selectFrom('administrators').select('email').executeTakeFirstOrThrow()
          assert.equal(admin.email, 'root@example.com')
        } finally {
          await h.close()
        }
      })
    })
  }
})
