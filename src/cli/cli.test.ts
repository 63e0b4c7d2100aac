import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { sql } from 'kysely'
import { login, STANDARD_SEED, TEST_SECRET, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { SoftAuthenticator } from '../../test/helpers/authenticator.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { BIN, ok, startAppWithCli, wristband } from '../../test/helpers/cli.js'
import { until } from '../../test/helpers/until.js'
import { openDatabase } from '../platform/db/database.js'
import { EXIT_STATUS } from '../platform/startup.js'

describe('wristband CLI: help and bad input', () => {
  const env = { DATABASE_URL: 'sqlite::memory:', JWT_SECRET: TEST_SECRET, NODE_ENV: 'test' }
  const commands = [
    ['admin', 'create'],
    ['admin', 'disable'],
    ['admin', 'enable'],
    ['admin', 'reset-mfa'],
    ['admin', 'reset-passkeys'],
    ['admin', 'reset-password'],
    ['apikey', 'create'],
    ['apikey', 'list'],
    ['apikey', 'revoke'],
    ['audit'],
    ['secret', 'generate'],
  ]

  test('every command has --help, without needing a valid configuration', async () => {
    const broken = { ...env, NODE_ENV: 'production', JWT_SECRET: '' }
    const runs = await Promise.all(commands.map((c) => wristband([...c, '--help'], broken)))
    for (const [i, run] of runs.entries()) {
      assert.match(ok(run), new RegExp(`^Usage: wristband ${commands[i]!.join(' ')}`), commands[i]!.join(' '))
    }
    assert.match(ok(await wristband(['--help'], env)), /admin create\|disable/)
    assert.match(ok(await wristband(['admin', '--help'], env)), /reset-mfa/)
  })

  test('an unreachable database is named without its password, exit code 15', async () => {
    const run = await wristband(['apikey', 'list', '--event', '1'], {
      ...env,
      DATABASE_URL: 'postgres://postgres:hunter2@127.0.0.1:1/nowhere',
    })
    assert.equal(run.code, 15)
    assert.match(run.stderr, /cannot use the database postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/nowhere/)
    assert.doesNotMatch(run.stderr, /hunter2/)
  })

  test('bad input gets a clear message and exit code 2', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['admin', 'create', '--email', 'not-an-address', '--role', 'admin'],
        /--email is not an e-mail address/,
      ],
      [
        ['admin', 'create', '--email', 'a@example.com', '--role', 'owner'],
        /--role must be admin or superadmin/,
      ],
      [['admin', 'create', '--email', 'a@example.com', '--role', 'admin'], /an admin needs --event-ids/],
      [['admin', 'create', '--role', 'admin'], /--email is required/],
      [['admin', 'disable'], /give either --email or --id/],
      [['admin', 'disable', '--id', 'x1'], /--id must be a whole number/],
      [['admin', 'frobnicate'], /unknown command "frobnicate"/],
      [['apikey'], /Usage: wristband apikey <command>/],
      [['admin', 'reset-mfa', '--emial', 'a@example.com'], /Unknown option '--emial'/],
      [['apikey', 'create', '--event', '1', '--name', 'k', '--scopes', 'root'], /unknown: root/],
      [['apikey', 'revoke'], /--id is required/],
      [['audit', '--limit', '0'], /--limit must be a whole number from 1 to 10000/],
      [['secret', 'generate', '--bytes', '8'], /--bytes must be a whole number from 32 to 512/],
    ]
    const runs = await Promise.all(cases.map(([args]) => wristband(args, env)))
    for (const [i, run] of runs.entries()) {
      assert.equal(run.code, 2, `${cases[i]![0].join(' ')}: ${run.stderr}`)
      assert.match(run.stderr, cases[i]![1])
      assert.doesNotMatch(run.stderr, /\n\s+at /, 'a stack trace was printed')
    }
  })
})

/** A small seed document for `wristband seed`: one of each kind it creates. */
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
    assert.equal(res.code, 10, res.stderr)
    const lines = res.stderr.split('\n').filter((l) => l.startsWith('wristband: '))
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
      assert.equal(notJson.code, EXIT_STATUS.usage)
      assert.match(notJson.stderr, /not JSON/)
      const bad = await wristband(['seed', '-'], env, JSON.stringify({ administrators: [{ email: 'x' }] }))
      assert.equal(bad.code, EXIT_STATUS.usage)
      assert.match(bad.stderr, /invalid seed document/)
      assert.match(bad.stderr, /\/administrators\/0/)
      assert.ok(!fs.existsSync(path.join(dir, 'wristband.db')), 'refused before touching the database')
      assert.ok(!bad.stderr.includes('    at '), 'no stack trace')
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  eachBackend(httpBackends, 'migrate and seed', (backend) => {
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
        const op = await h.db.selectFrom('users').select(['mode', 'password_hash']).executeTakeFirstOrThrow()
        assert.equal(op.mode, 3)
        assert.match(op.password_hash, /^\$argon2id\$/, 'stored hashed')
        const admin = await h.db.selectFrom('administrators').select('email').executeTakeFirstOrThrow()
        assert.equal(admin.email, 'root@example.com')
      } finally {
        await h.close()
      }
    })
  })
})

eachBackend(httpBackends, 'wristband CLI on the configured database', (backend) => {
  let t: TestApp
  let env: Record<string, string>
  const cli = (args: string[], input?: string) => wristband(args, env, input)
  const auditRows = (kind: string) =>
    t.db.db.selectFrom('audit_log').selectAll().where('kind', '=', kind).orderBy('id').execute()

  let close = async () => {}
  before(async () => {
    ;({ t, env, close } = await startAppWithCli(backend))
    await t.seed({ events: STANDARD_SEED.events! })
  })
  after(() => close())

  test('admin create: the new administrator signs in; duplicates are refused and recorded', async () => {
    const out = ok(
      await cli(
        [
          'admin',
          'create',
          '--email',
          'Ops@Example.com',
          '--role',
          'admin',
          '--event-ids',
          '1,2',
          '--password-stdin',
        ],
        'stdin-password-1\n',
      ),
    )
    assert.match(out, /created administrator \d+ \(ops@example\.com, admin\)/)
    assert.doesNotMatch(out, /password:/)
    await login(t, 'ops@example.com', 'admin', 'stdin-password-1')

    const generated = ok(
      await cli(['admin', 'create', '--email', 'root2@example.com', '--role', 'superadmin']),
    )
    const password = /password: (\S+)/.exec(generated)?.[1]
    assert.ok(password, generated)
    await login(t, 'root2@example.com', 'admin', password)

    const dup = await cli(['admin', 'create', '--email', 'ops@example.com', '--role', 'superadmin'])
    assert.equal(dup.code, 1)
    assert.match(dup.stderr, /an administrator with e-mail ops@example\.com exists/)
    const missingEvent = await cli([
      'admin',
      'create',
      '--email',
      'x@example.com',
      '--role',
      'admin',
      '--event-ids',
      '99',
    ])
    assert.equal(missingEvent.code, 1)
    assert.match(missingEvent.stderr, /no event with id 99/)

    const rows = await auditRows('cli_admin_create')
    assert.deepEqual(
      rows.map((r) => [r.actor, r.outcome]),
      [
        ['cli', 'success'],
        ['cli', 'success'],
        ['cli', 'failure'],
        ['cli', 'failure'],
      ],
    )
    assert.equal(JSON.parse(rows[0]!.detail!).email, 'ops@example.com')
    for (const r of rows) assert.doesNotMatch(r.detail ?? '', /stdin-password-1|password/i)
  })

  test('admin reset-mfa recovers an administrator locked out of MFA and ends their sessions', async () => {
    ok(
      await cli(
        [
          'admin',
          'create',
          '--email',
          'mfa@example.com',
          '--role',
          'admin',
          '--event-ids',
          '1',
          '--password-stdin',
        ],
        'mfa-password-1',
      ),
    )
    const session = await login(t, 'mfa@example.com', 'admin', 'mfa-password-1')
    await sql`update administrators set is_two_factor_authentication_enabled = 1, mfa_secret = 'sealed' where email = 'mfa@example.com'`.execute(
      t.db.db,
    )

    const out = ok(await cli(['admin', 'reset-mfa', '--email', 'mfa@example.com']))
    assert.match(out, /MFA reset for administrator \d+ \(mfa@example\.com\); 1 session\(s\) ended/)
    const row = await sql<{ enabled: number; secret: string | null }>`
        select is_two_factor_authentication_enabled as enabled, mfa_secret as secret
        from administrators where email = 'mfa@example.com'`.execute(t.db.db)
    assert.deepEqual({ ...row.rows[0], enabled: Number(row.rows[0]!.enabled) }, { enabled: 0, secret: null })
    const refreshed = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: session.refresh_token },
    })
    assert.equal(refreshed.statusCode, 401, 'a session of the locked-out administrator survived')
    if (t.config.REDIS_URL) {
      // With Redis the running service learns the revocation at once, /tokens/verify included.
      const verified = await t.request({
        method: 'POST',
        url: '/tokens/verify',
        payload: { token: session.refresh_token },
      })
      assert.equal(verified.json().valid, false)
    }
    await login(t, 'mfa@example.com', 'admin', 'mfa-password-1')
    const [audit] = await auditRows('cli_admin_reset_mfa')
    assert.equal(audit!.outcome, 'success')
    assert.ok(JSON.parse(audit!.detail!).cleared.includes('mfa_secret'))
  })

  test("admin reset-passkeys removes an administrator's passkeys and ends their sessions", async () => {
    ok(
      await cli(
        [
          'admin',
          'create',
          '--email',
          'pk@example.com',
          '--role',
          'admin',
          '--event-ids',
          '1',
          '--password-stdin',
        ],
        'pk-password-1',
      ),
    )
    const session = await login(t, 'pk@example.com', 'admin', 'pk-password-1')
    const key = new SoftAuthenticator('https://localhost', 'localhost')
    const opts = await t.request({
      method: 'POST',
      url: '/admin/passkeys/registration/options',
      token: session.access_token,
    })
    assert.equal(opts.statusCode, 200, opts.body)
    const registered = await t.request({
      method: 'POST',
      url: '/admin/passkeys/registration',
      token: session.access_token,
      payload: {
        flow: opts.json().flow,
        response: key.register(opts.json().options),
        password: 'pk-password-1',
      },
    })
    assert.equal(registered.statusCode, 201, registered.body)

    const out = ok(await cli(['admin', 'reset-passkeys', '--email', 'pk@example.com']))
    assert.match(out, /passkeys reset for administrator \d+ \(pk@example\.com\); 1 session\(s\) ended/)
    const left = await t.db.db.selectFrom('passkeys').select('id').execute()
    assert.equal(left.length, 0)
    const refreshed = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: session.refresh_token },
    })
    assert.equal(refreshed.statusCode, 401, 'a session of the administrator survived')
    const signIn = await t.request({ method: 'POST', url: '/auth/passkey/options' })
    const assertion = key.assert(signIn.json().options)
    const refused = await t.request({
      method: 'POST',
      url: '/auth/passkey',
      payload: { flow: signIn.json().flow, response: assertion },
    })
    assert.equal(refused.statusCode, 401, 'the removed passkey signs in no more')
    const [audit] = await auditRows('cli_admin_reset_passkeys')
    assert.equal(audit!.outcome, 'success')
    assert.equal(JSON.parse(audit!.detail!).passkeys_removed, 1)
  })

  test('admin reset-passkeys --dashboard-user / --network-manager: the dashboard accounts recover too', async () => {
    await t.seed({
      dashboard_users: [{ username: 'cli-partner', password: 's3cret-pass', event_ids: [1] }],
      network_managers: [{ email: 'cli-nm@example.com', password: 's3cret-pass', event_ids: [1] }],
    })
    const ids = {
      dashboard_user: (
        await t.db.db
          .selectFrom('dashboard_users')
          .select('id')
          .where('username', '=', 'cli-partner')
          .executeTakeFirstOrThrow()
      ).id,
      network_manager: (
        await t.db.db
          .selectFrom('network_managers')
          .select('id')
          .where('email', '=', 'cli-nm@example.com')
          .executeTakeFirstOrThrow()
      ).id,
    }
    // Stored as the dashboard stores them (the ceremonies themselves: src/security/dashboard-passkeys.test.ts).
    for (const [kind, id] of Object.entries(ids))
      await t.db.db
        .insertInto('passkeys')
        .values({
          subject_kind: kind,
          subject_id: id,
          credential_id: `cli-${kind}`,
          public_key: 'pQECAyYgASFYIA',
          counter: 0,
          transports: '',
          name: 'Lost phone',
          aaguid: '00000000-0000-0000-0000-000000000000',
          backed_up: 0,
          created_at: t.clock.now(),
        })
        .execute()
    const left = async (kind: string) =>
      (await t.db.db.selectFrom('passkeys').select('id').where('subject_kind', '=', kind).execute()).length

    const both = await cli([
      'admin',
      'reset-passkeys',
      '--email',
      'x@example.com',
      '--dashboard-user',
      'cli-partner',
    ])
    assert.equal(both.code, 2, both.stderr)
    assert.match(
      ok(await cli(['admin', 'reset-passkeys', '--dashboard-user', 'cli-partner'])),
      /passkeys reset for dashboard user cli-partner; \d+ session\(s\) ended/,
    )
    assert.equal(await left('dashboard_user'), 0)
    assert.equal(await left('network_manager'), 1)
    assert.match(
      ok(await cli(['admin', 'reset-passkeys', '--network-manager', 'CLI-NM@example.com'])),
      /passkeys reset for network manager cli-nm@example\.com/,
    )
    assert.equal(await left('network_manager'), 0)
    const unknown = await cli(['admin', 'reset-passkeys', '--dashboard-user', 'nobody'])
    assert.equal(unknown.code, 1)
    const audits = (await auditRows('cli_admin_reset_passkeys')).map((r) => [
      r.outcome,
      JSON.parse(r.detail!).kind,
    ])
    assert.deepEqual(audits.slice(-3), [
      ['success', 'dashboard_user'],
      ['success', 'network_manager'],
      ['failure', undefined],
    ])
  })

  test('admin reset-password, disable and enable', async () => {
    ok(
      await cli(
        [
          'admin',
          'create',
          '--email',
          'pw@example.com',
          '--role',
          'admin',
          '--event-ids',
          '1',
          '--password-stdin',
        ],
        'first-password',
      ),
    )
    const session = await login(t, 'pw@example.com', 'admin', 'first-password')
    const id = (
      await t.db.db
        .selectFrom('administrators')
        .select('id')
        .where('email', '=', 'pw@example.com')
        .executeTakeFirstOrThrow()
    ).id

    const short = await cli(['admin', 'reset-password', '--id', String(id), '--password-stdin'], 'short')
    assert.equal(short.code, 2)
    assert.match(short.stderr, /8 to 128 characters/)
    ok(await cli(['admin', 'reset-password', '--id', String(id), '--password-stdin'], 'second-password\n'))
    const old = await t.request({
      method: 'POST',
      url: '/auth/login',
      payload: { email: 'pw@example.com', password: 'first-password' },
    })
    assert.equal(old.statusCode, 401)
    const refreshed = await t.request({
      method: 'POST',
      url: '/auth/refresh',
      payload: { refresh_token: session.refresh_token },
    })
    assert.equal(refreshed.statusCode, 401)
    await login(t, 'pw@example.com', 'admin', 'second-password')

    assert.match(ok(await cli(['admin', 'disable', '--email', 'pw@example.com'])), /disabled administrator/)
    const refused = await t.request({
      method: 'POST',
      url: '/auth/login',
      payload: { email: 'pw@example.com', password: 'second-password' },
    })
    assert.equal(refused.statusCode, 401)
    ok(await cli(['admin', 'enable', '--email', 'pw@example.com']))
    await login(t, 'pw@example.com', 'admin', 'second-password')

    const unknown = await cli(['admin', 'disable', '--email', 'nobody@example.com'])
    assert.equal(unknown.code, 1)
    assert.match(unknown.stderr, /no administrator with e-mail nobody@example\.com/)
    for (const kind of ['cli_admin_reset_password', 'cli_admin_disable', 'cli_admin_enable'])
      assert.ok(
        (await auditRows(kind)).some((r) => r.outcome === 'success'),
        kind,
      )
  })

  test('apikey create, list and revoke; the key is shown once and never recorded', async () => {
    const out = ok(
      await cli(['apikey', 'create', '--event', '1', '--name', 'box office', '--scopes', 'api:read']),
    )
    const key = /api key \(shown only now\): (wb_\S+)/.exec(out)?.[1]
    const id = Number(/created API key (\d+)/.exec(out)?.[1])
    assert.ok(key && id, out)
    const check = () => verifyToken(t, key)
    const verified = await check()
    assert.equal(verified.valid, true)
    assert.deepEqual(verified.claims.permissions, { '1': ['api:read'] })

    const listed = ok(await cli(['apikey', 'list', '--event', '1', '--json']))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    assert.deepEqual(
      listed.map((k) => [k.id, k.name, k.revoked_at]),
      [[id, 'box office', null]],
    )
    assert.match(ok(await cli(['apikey', 'list', '--event', '1'])), /box office/)

    ok(await cli(['apikey', 'revoke', '--id', String(id)]))
    // The running instance learns a revocation written by another process within
    // REVOCATION_POLL_MS (at once through the Redis feed): polled, not asserted at once.
    await until('the revoked key to be refused', async () => (await check()).valid === false)
    const again = await cli(['apikey', 'revoke', '--id', String(id)])
    assert.equal(again.code, 1)
    assert.match(again.stderr, /already revoked/)
    const none = await cli(['apikey', 'create', '--event', '42', '--name', 'x'])
    assert.equal(none.code, 1)
    assert.match(none.stderr, /no event with id 42/)

    const all = await t.db.db.selectFrom('audit_log').select('detail').execute()
    assert.ok(!all.some((r) => r.detail?.includes(key!)), 'the plaintext key reached the audit log')
  })

  test('secret generate prints a fresh secret and records nothing (it opens no database)', async () => {
    const [a, b] = await Promise.all([
      cli(['secret', 'generate']),
      cli(['secret', 'generate', '--bytes', '32']),
    ])
    const first = ok(a).trim()
    const second = ok(b).trim()
    assert.match(first, /^[A-Za-z0-9_-]{64}$/)
    assert.match(second, /^[A-Za-z0-9_-]{43}$/)
    assert.equal((await auditRows('cli_secret_generate')).length, 0)
  })

  test('audit prints the log, and --follow keeps printing until interrupted', async () => {
    const lines = ok(await cli(['audit', '--kind', 'cli_apikey_revoke', '--json']))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    assert.deepEqual(
      lines.map((l) => [l.kind, l.outcome]),
      [
        ['cli_apikey_revoke', 'success'],
        ['cli_apikey_revoke', 'failure'],
      ],
    )
    assert.match(ok(await cli(['audit', '--limit', '3'])), /cli_audit_read {2}success {2}actor=cli/)
    // Each JSON line carries the cursor that resumes after it: --after prints what follows, nothing twice.
    assert.match(lines[0].cursor, /^\d+-\d+$/)
    const resumed = ok(
      await cli(['audit', '--after', lines[0].cursor, '--kind', 'cli_apikey_revoke', '--json']),
    )
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    assert.deepEqual(resumed, [lines[1]])
    const everything = ok(await cli(['audit', '--after', '0-0', '--json']))
      .trim()
      .split('\n')
    const ids = everything.map((l) => JSON.parse(l).id)
    assert.equal(new Set(ids).size, ids.length)
    assert.ok(ids.length > 10)
    const bad = await cli(['audit', '--after', '17'])
    assert.equal(bad.code, 2)
    assert.match(bad.stderr, /--after must be a cursor/)

    const child = spawn(process.execPath, [BIN, 'audit', '--follow', '--kind', 'follow_probe'], {
      env: { PATH: process.env.PATH ?? '', ...env },
      cwd: env.DATA_DIR,
    })
    let stdout = ''
    child.stdout.on('data', (d) => {
      stdout += d
    })
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve))
    try {
      // The follower records its own start; once that row exists it is polling. A process start on a
      // loaded machine can take long: the wait is generous, and the child is killed whatever happens.
      await until(
        'the follower to record its start',
        async () => (await auditRows('cli_audit_read')).some((r) => r.detail?.includes('"follow":true')),
        60_000,
      )
      await t.db.db
        .insertInto('audit_log')
        .values({
          at: Date.now(),
          kind: 'follow_probe',
          actor: 'test',
          ip: null,
          outcome: 'success',
          detail: null,
        })
        .execute()
      await until('the follower to print the probe', () => stdout.includes('follow_probe'), 60_000)
    } finally {
      child.kill('SIGTERM')
    }
    assert.equal(await exited, 0)
    assert.match(stdout, /follow_probe {2}success {2}actor=test/)
  })

  test('every break-glass command left an audit record with actor cli', async () => {
    const kinds = await t.db.db
      .selectFrom('audit_log')
      .select('kind')
      .distinct()
      .where('actor', '=', 'cli')
      .execute()
    const expected = [
      'cli_admin_create',
      'cli_admin_disable',
      'cli_admin_enable',
      'cli_admin_reset_mfa',
      'cli_admin_reset_passkeys',
      'cli_admin_reset_password',
      'cli_apikey_create',
      'cli_apikey_list',
      'cli_apikey_revoke',
      'cli_audit_read',
    ]
    assert.deepEqual(kinds.map((k) => k.kind).sort(), expected)
  })
})
