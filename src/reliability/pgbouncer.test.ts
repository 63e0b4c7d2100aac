// The service behind PgBouncer in transaction mode (a private pgbouncer on a free port in front of the
// shared PostgreSQL), configured as docs/operations.md ("PgBouncer") says: two instances migrate, sign
// in, refresh, transfer a ticket and use it through it. The pooler has three server connections, fewer
// than one instance's pool, always open and handed out in turn (`server_round_robin`), so consecutive
// statements of one client outside a transaction run on different server connections: anything the
// service kept in a session (a lock, a setting) would show. A pooler that drops the schema the service
// asks for is refused at start.
import assert from 'node:assert/strict'
import type { ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import pg from 'pg'
import { login, STANDARD_SEED, startApp, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { newTicketType, newTransfer, partnerGet, seedPartner } from '../../test/helpers/partner.js'
import { freePort, killProcess, pgbouncerBinary, startPgBouncer } from '../../test/helpers/processes.js'
import { TcpRelay } from '../../test/helpers/tcp-relay.js'
import { until } from '../../test/helpers/until.js'

// Server connections per database entry: fewer than one instance's pool (DATABASE_POOL_SIZE 10), and
// odd, so that a statement, a transaction and the next statement of one client meet three of them.
const SERVER_CONNECTIONS = 3

eachBackend(
  httpBackends.filter((b) => b.name.startsWith('postgres')),
  'behind PgBouncer in transaction mode (own pgbouncer)',
  (backend) => {
    let dir: string
    let pooler: ChildProcess
    let port: number
    let p: ProvisionedBackend
    let schema: string
    let relay: TcpRelay

    before(async () => {
      p = await backend.provision()
      schema = p.env.DATABASE_SCHEMA!
      await onServer(`create schema ${schema}_elsewhere`)
      const server = new URL(p.env.DATABASE_URL!)
      const entry = `host=${server.hostname} port=${server.port || 5432} dbname=${server.pathname.slice(1)} user=${decodeURIComponent(server.username)}`
      // The server as the pooler reaches it for the outage test: through a relay the test can cut.
      relay = new TcpRelay({ host: server.hostname, port: Number(server.port || 5432) })
      await relay.open()
      const relayed = `host=127.0.0.1 port=${relay.port} dbname=${server.pathname.slice(1)} user=${decodeURIComponent(server.username)}`
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-pgbouncer-'))
      port = await freePort()
      pooler = await startPgBouncer(
        port,
        dir,
        [
          // As documented: the schema set on the pooler's entry, for every server connection it opens
          // (named, so that this test finds its own server connections among the shared server's).
          `wristband = ${entry} application_name=${schema} connect_query='SET search_path = ${schema}'`,
          // The service's search_path dropped and the role's default in its place (here another
          // schema, so that nothing lands in the shared database's public schema).
          `elsewhere = ${entry} connect_query='SET search_path = ${schema}_elsewhere'`,
          `relayed = ${relayed} connect_query='SET search_path = ${schema}'`,
        ],
        [
          `default_pool_size = ${SERVER_CONNECTIONS}`,
          `min_pool_size = ${SERVER_CONNECTIONS}`,
          'server_round_robin = 1',
          // The outage test: a server that was gone is tried again after a second (default 15).
          'server_login_retry = 1',
          // A query waits this long for a server connection, then fails (default 120 s).
          'query_wait_timeout = 5',
        ],
      )
    })
    after(async () => {
      if (pooler) await killProcess(pooler)
      await relay?.cut()
      if (p) await onServer(`drop schema if exists ${schema}_elsewhere cascade`)
      await p?.dispose()
      if (dir) fs.rmSync(dir, { recursive: true, force: true })
    })

    /** One statement straight on the PostgreSQL server. */
    async function onServer(statement: string) {
      const client = new pg.Client({ connectionString: p.env.DATABASE_URL })
      await client.connect()
      try {
        return await client.query(statement)
      } finally {
        await client.end()
      }
    }

    /** Advisory locks (the migration lock) held by this pooler's server connections. */
    async function advisoryLocksHeld(): Promise<number> {
      const r = await onServer(
        `select count(*)::int as n from pg_locks l join pg_stat_activity a on a.pid = l.pid
         where l.locktype = 'advisory' and a.application_name = '${schema}'`,
      )
      return r.rows[0].n
    }

    const through = (database: string) => ({
      ...p.env,
      DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/${database}`,
    })

    test('two instances migrate, sign in, refresh, transfer and use tickets through it; concurrent writes keep one winner', async () => {
      const viaPooler: ProvisionedBackend = { env: through('wristband'), dispose: async () => {} }
      // The first instance applies every migration through the pooler; the second takes the lock again.
      const a = await startApp(backend, {}, viaPooler)
      let b: TestApp | undefined
      try {
        assert.equal(await advisoryLocksHeld(), 0, 'the migration lock ended with the migrations')
        b = await startApp(backend, {}, viaPooler)
        await flow(a, b)
        assert.equal(await advisoryLocksHeld(), 0)
      } finally {
        await b?.close()
        await a.close()
      }
    })

    async function flow(a: TestApp, b: TestApp) {
      for (const t of [a, b]) {
        const ready = await t.request({ method: 'GET', url: '/ready' })
        assert.equal(ready.statusCode, 200, ready.body)
        assert.deepEqual(ready.json().checks.database.pending_migrations, [])
      }
      const keys = await seedPartner(a)

      // Sign-in on one instance, refresh on the other, verify the new pair on the first.
      const pair = await login(a, 'ev1@example.com')
      const refreshed = await b.request({
        method: 'POST',
        url: '/auth/refresh',
        payload: { refresh_token: pair.refresh_token },
      })
      assert.equal(refreshed.statusCode, 200, refreshed.body)
      const next = refreshed.json() as { access_token: string; refresh_token: string }
      assert.equal((await verifyToken(a, next.access_token)).valid, true)
      assert.equal((await verifyToken(a, pair.refresh_token)).valid, false, 'rotated away')

      // Eight refreshes of one token at once, over both instances: exactly one rotation wins.
      const raced = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          [a, b][i % 2]!.request({
            method: 'POST',
            url: '/auth/refresh',
            payload: { refresh_token: next.refresh_token },
          }),
        ),
      )
      assert.equal(raced.filter((r) => r.statusCode === 200).length, 1, 'one rotation')
      assert.ok(raced.every((r) => r.statusCode === 200 || r.statusCode === 401))

      // The partner flow: a ticket type on one instance, the transfer on the other.
      const ticketUid = await newTicketType(a, keys.write)
      const { transfer_uid, company_ticket_id } = await newTransfer(b, keys.write, ticketUid)
      const scanner = (await login(b, 'op@example.com', 'operator')).access_token
      // Ten scans at once over both instances: one USED, nine 409.
      const scans = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          [a, b][i % 2]!.request({
            method: 'POST',
            url: `/tickets/${transfer_uid}/use`,
            token: scanner,
            payload: { access_gate: 'North' },
          }),
        ),
      )
      assert.equal(scans.filter((r) => r.statusCode === 200).length, 1, 'one use')
      assert.equal(scans.filter((r) => r.statusCode === 409).length, 9)
      const seen = await partnerGet(a, `/companies/transfer/${company_ticket_id}`, keys.read)
      assert.equal(seen.json().status, 'USED')

      // Everything went to the service's schema.
      const used = await onServer(
        `select count(*)::int as n from ${schema}.transfers where uid = '${transfer_uid}' and status = 'USED'`,
      )
      assert.equal(used.rows[0].n, 1)
    }

    test("a pooler that drops the schema the service asks for (queries would land in the role's default schema) is refused at start, naming the fix", async () => {
      // What the service meets: PgBouncer accepts the search_path it asks for and drops it.
      const probe = new pg.Client({
        connectionString: `postgres://postgres@127.0.0.1:${port}/elsewhere`,
        options: `-c search_path=${schema}`,
      })
      await probe.connect()
      try {
        assert.equal((await probe.query('select current_schema() as s')).rows[0].s, `${schema}_elsewhere`)
      } finally {
        await probe.end()
      }
      await assert.rejects(
        startApp(backend, {}, { env: through('elsewhere'), dispose: async () => {} }),
        (err: Error) => {
          assert.match(err.message, new RegExp(`not DATABASE_SCHEMA ${schema}`))
          assert.match(err.message, /connect_query='SET search_path = /)
          return true
        },
      )
      const created = await onServer(
        `select count(*)::int as n from information_schema.tables where table_schema = '${schema}_elsewhere'`,
      )
      assert.equal(created.rows[0].n, 0, 'nothing was created in the wrong schema')
    })

    test('the server behind the pooler gone: requests answer 503 (never 500) and change nothing, /ready 503; all well once it is back', async () => {
      const t = await startApp(backend, {}, { env: through('relayed'), dispose: async () => {} })
      try {
        await t.seed(STANDARD_SEED)
        const pair = await login(t, 'ev1@example.com')
        const stored = async () =>
          (await onServer(`select jti, rotated_at, revoked_at from ${schema}.refresh_tokens order by jti`))
            .rows
        const before = await stored()

        await relay.cut()
        for (const [method, url, payload, token] of [
          ['POST', '/auth/login', { email: 'ev1@example.com', password: 's3cret-pass' }, undefined],
          ['POST', '/auth/refresh', { refresh_token: pair.refresh_token }, undefined],
          ['POST', '/auth/logout', { refresh_token: pair.refresh_token }, pair.access_token],
          ['GET', '/admin/me', undefined, pair.access_token],
        ] as const) {
          const res = await t.request({
            method,
            url,
            ...(payload ? { payload } : {}),
            ...(token ? { token } : {}),
          })
          assert.equal(res.statusCode, 503, `${method} ${url}: ${res.body}`)
        }
        const down = await t.request({ method: 'GET', url: '/ready' })
        assert.equal(down.statusCode, 503, down.body)
        assert.deepEqual(await stored(), before, 'nothing was written')

        await relay.open()
        await until(
          'ready again',
          async () => (await t.request({ method: 'GET', url: '/ready' })).statusCode === 200,
        )
        const res = await t.request({
          method: 'POST',
          url: '/auth/refresh',
          payload: { refresh_token: pair.refresh_token },
        })
        assert.equal(res.statusCode, 200, 'the refresh token refused with 503 is still good')
      } finally {
        await t.close()
      }
    })
  },
  pgbouncerBinary ? undefined : 'pgbouncer is not installed (apt-get install pgbouncer): SKIPPED',
)
