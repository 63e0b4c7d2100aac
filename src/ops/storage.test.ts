// Storage that takes no writes: a full disk, a read-only database. Every write is then a
// 503 (nothing changed, try again), never a 500; /ready says 503 so that the balancer stops sending;
// one log line names the path; all of it ends when the storage takes writes again.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { describe, test } from 'node:test'
import { sql } from 'kysely'
import pg from 'pg'
import { STANDARD_SEED, startApp, type TestApp } from '../../test/helpers/app.js'
import { backends } from '../../test/helpers/backends.js'
import { waitFor } from '../../test/helpers/until.js'

const PG = process.env.TEST_DATABASE_URL

function signIn(t: TestApp) {
  return t.request({
    method: 'POST',
    url: '/auth/login',
    payload: { email: 'root@example.com', password: 's3cret-pass', role: 'admin' },
  })
}

function readyUntil(t: TestApp, status: number) {
  return waitFor(
    async () => {
      const res = await t.request({ method: 'GET', url: '/ready' })
      return res.statusCode === status && res
    },
    15_000,
    `/ready to answer ${status}`,
  )
}

function storageLines(t: TestApp): Record<string, unknown>[] {
  return t.logs
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => String(l.msg).startsWith('storage failure'))
}

/** A small tmpfs of our own, so the disk can really be filled (needs root; skipped loudly without). */
function mountSmallDisk(): string | undefined {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-disk-'))
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=8m,mode=0700', 'tmpfs', dir])
  if (r.status !== 0) {
    fs.rmSync(dir, { recursive: true, force: true })
    return undefined
  }
  return dir
}
const canMount = (() => {
  if (process.getuid?.() !== 0) return false
  const dir = mountSmallDisk()
  if (!dir) return false
  spawnSync('umount', [dir])
  fs.rmSync(dir, { recursive: true, force: true })
  return true
})()
if (!canMount) console.log('!! cannot mount a tmpfs (needs root): the full-disk test is SKIPPED')

/** Fills the file system holding `dir` with one file, to the last byte. */
function fill(dir: string): string {
  const file = path.join(dir, 'filler')
  const fd = fs.openSync(file, 'w')
  const chunk = Buffer.alloc(64 * 1024)
  try {
    for (let size = chunk.length; size >= 1; ) {
      try {
        fs.writeSync(fd, chunk, 0, size)
      } catch (err) {
        if ((err as { code?: string }).code !== 'ENOSPC') throw err
        size = Math.floor(size / 2)
      }
    }
  } finally {
    fs.closeSync(fd)
  }
  return file
}

describe('storage that takes no writes', () => {
  test('a full disk under SQLite: sign-in 503, /ready 503, one line naming the path; both recover', {
    skip: canMount ? false : 'needs root to mount a tmpfs',
  }, async () => {
    const dir = mountSmallDisk()!
    const t = await startApp(
      backends[0]!,
      {},
      {
        env: { DATA_DIR: dir, DATABASE_URL: `sqlite:${path.join(dir, 'wristband.db')}` },
        dispose: async () => {
          spawnSync('umount', [dir])
          fs.rmSync(dir, { recursive: true, force: true })
        },
      },
    )
    try {
      await t.seed(STANDARD_SEED)
      assert.equal((await signIn(t)).statusCode, 200)
      // The write-ahead log emptied, so the next write has to grow a file on the full disk.
      await sql`pragma wal_checkpoint(TRUNCATE)`.execute(t.db.db)
      const filler = fill(dir)
      const outageFrom = t.logs.length

      const ready = await readyUntil(t, 503)
      assert.equal(ready.json().status, 'unavailable')
      assert.deepEqual(ready.json().checks.data_dir, { status: 'down', reason: 'disk_full' })
      assert.equal(
        (await t.request({ method: 'GET', url: '/live' })).statusCode,
        200,
        'liveness asks no disk',
      )
      const refused = await signIn(t)
      assert.equal(refused.statusCode, 503, refused.body)
      assert.equal(refused.json().detail, 'Service temporarily unavailable')
      for (let i = 0; i < 3; i++) assert.equal((await signIn(t)).statusCode, 503)
      const lines = storageLines(t)
      assert.ok(lines.length >= 1 && lines.length <= 2, JSON.stringify(lines))
      for (const line of lines) {
        assert.equal(line.level, 'error')
        assert.match(String(line.msg), new RegExp(`cannot write ${dir}.*disk full`))
      }
      assert.ok(!t.logs.some((l) => l.includes('unhandled error')), 'a write failure was a 500')
      // One outage, a few lines, not one per request: the refused sign-ins (each would audit) add no
      // stack trace, and their lost audit records are told once within the minute.
      const during = t.logs
        .slice(outageFrom)
        .map((l) => JSON.parse(l) as { msg: string; err?: { stack?: string } })
      assert.deepEqual(
        during.filter((l) => l.err?.stack !== undefined).map((l) => JSON.stringify(l).slice(0, 300)),
        [],
        'stack traces logged during the outage',
      )
      assert.equal(during.filter((l) => l.msg.startsWith('audit write failed')).length, 1)

      fs.rmSync(filler)
      t.clock.advance(60_000)
      await readyUntil(t, 200)
      assert.equal((await signIn(t)).statusCode, 200)
      assert.ok(t.logs.some((l) => l.includes('storage writable again')))
    } finally {
      await t.close()
    }
  })

  test('a read-only PostgreSQL session (a replica): sign-in 503, /ready 503 read_only; both recover', {
    skip: PG ? false : 'TEST_DATABASE_URL is not set: PostgreSQL case SKIPPED',
  }, async () => {
    const admin = new pg.Client({ connectionString: PG })
    await admin.connect()
    const role = `wb_ro_${randomBytes(5).toString('hex')}`
    const schema = `wbtest_${randomBytes(6).toString('hex')}`
    await admin.query(`create role ${role} login superuser`)
    const url = new URL(PG!)
    url.username = role
    url.password = ''
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-test-'))
    const dropSessions = () =>
      admin.query('select pg_terminate_backend(pid) from pg_stat_activity where usename = $1', [role])
    let t: TestApp | undefined
    try {
      t = await startApp(
        backends[0]!,
        {},
        {
          env: { DATA_DIR: dir, DATABASE_URL: url.toString(), DATABASE_SCHEMA: schema },
          dispose: async () => {},
        },
      )
      await t.seed(STANDARD_SEED)
      assert.equal((await signIn(t)).statusCode, 200)

      await admin.query(`alter role ${role} set default_transaction_read_only = on`)
      await dropSessions()
      // The first probe may meet a terminated connection (57P01) before the pool opens a new one.
      const ready = await waitFor(
        async () => {
          const res = await t!.request({ method: 'GET', url: '/ready' })
          return res.json().checks.database.reason === 'read_only' && res
        },
        15_000,
        '/ready to say read_only',
      )
      assert.equal(ready.statusCode, 503)
      const refused = await waitFor(
        async () => {
          const res = await signIn(t!)
          return res.statusCode !== 200 && res
        },
        10_000,
        'a refused sign-in',
      )
      assert.equal(refused.statusCode, 503, refused.body)
      for (let i = 0; i < 3; i++) assert.equal((await signIn(t)).statusCode, 503)
      assert.equal(storageLines(t).length, 1, JSON.stringify(storageLines(t)))
      assert.match(String(storageLines(t)[0]!.msg), new RegExp(`cannot write postgres://${role}@.*read-only`))
      assert.ok(!t.logs.some((l) => l.includes('unhandled error')), 'a write failure was a 500')

      await admin.query(`alter role ${role} reset default_transaction_read_only`)
      await dropSessions()
      t.clock.advance(60_000)
      await readyUntil(t, 200)
      await waitFor(async () => (await signIn(t!)).statusCode === 200, 10_000, 'sign-in to work again')
    } finally {
      await t?.close()
      await admin.query(`drop schema if exists ${schema} cascade`)
      await admin.query(`drop owned by ${role}`)
      await admin.query(`drop role ${role}`)
      await admin.end()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
