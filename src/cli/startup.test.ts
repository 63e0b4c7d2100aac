// The command line as a platform engineer meets it first: help and version, start-up failures in one
// line, typos in the environment. Each case runs the built command in its own process.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { PRODUCTION_ENV, TEST_SECRET } from '../../test/helpers/app.js'
import { BIN, type Run, wristband } from '../../test/helpers/cli.js'
import { EXIT_STATUS } from '../platform/startup.js'
import { SeedDocument } from '../seed/seed.js'

const PG = process.env.TEST_DATABASE_URL

/** One line on stderr, no stack trace, the given exit code. */
function oneLine(run: Run, code: number, pattern: RegExp): void {
  assert.equal(run.code, code, `exit ${run.code}\nstderr: ${run.stderr}`)
  const lines = run.stderr.trim().split('\n')
  assert.equal(lines.length, 1, `one line, got:\n${run.stderr}`)
  assert.match(lines[0]!, pattern)
  assert.doesNotMatch(run.stderr, /\n\s+at |TypeError/, 'a stack trace was printed')
}

describe('wristband command line: help, version and options', { concurrency: true }, () => {
  const env = { DATABASE_URL: 'sqlite::memory:', JWT_SECRET: TEST_SECRET }

  test('serve, migrate, seed and backup each have their own --help', async () => {
    for (const command of ['serve', 'migrate', 'seed', 'backup']) {
      const run = await wristband([command, '--help'], { NODE_ENV: 'production' })
      assert.equal(run.code, 0, run.stderr)
      assert.match(run.stdout, new RegExp(`^Usage: wristband ${command}\\b`), command)
      assert.doesNotMatch(run.stdout, /Break-glass administration/, `${command}: not the global help`)
    }
  })

  test('seed --help shows the format of the seed document: every section and every field of it', async () => {
    const run = await wristband(['seed', '--help'], {})
    const sections = SeedDocument.properties as Record<string, { items: { properties: object } }>
    for (const [list, schema] of Object.entries(sections)) {
      // The section's lines: up to the next section (four spaces in) or the document's end.
      const block = run.stdout.match(new RegExp(`"${list}":[\\s\\S]*?(?=\\n {4}"|\\n {2}})`))?.[0]
      assert.ok(block, `no "${list}" in seed --help`)
      for (const field of Object.keys(schema.items.properties).filter((f) => f !== 'id'))
        assert.match(block, new RegExp(`"${field}"`), `${list}.${field} is not in seed --help`)
    }
  })

  test('--version prints the version of package.json', async () => {
    const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))
    for (const flag of ['--version', '-V']) {
      const run = await wristband([flag], {})
      assert.equal(run.code, 0)
      assert.equal(run.stdout.trim(), pkg.version)
    }
  })

  test('unknown options and arguments are reported in one clear message, exit 2', async () => {
    const cases: [string[], RegExp][] = [
      [['--frobnicate'], /unknown option "--frobnicate"/],
      [['serve', '--wrokers', '2'], /^wristband serve: Unknown option '--wrokers'/],
      [['serve', '--workers', 'two'], /--workers must be a whole number/],
      [['migrate', 'extra'], /^wristband migrate: Unexpected argument 'extra'/],
      [['seed'], /give a FILE, or - to read standard input/],
      [['seed', 'a.json', 'b.json'], /unexpected argument "b.json"/],
    ]
    for (const [args, pattern] of cases) {
      const run = await wristband(args, env)
      assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`)
      assert.match(run.stderr.split('\n')[0]!, pattern, args.join(' '))
      assert.doesNotMatch(run.stderr, /\n\s+at /, `${args.join(' ')}: a stack trace was printed`)
    }
  })

  test('a missing seed file is one line', async () => {
    oneLine(
      await wristband(['seed', 'no-such-seed.json'], env),
      2,
      /cannot read no-such-seed\.json: no such file/,
    )
  })

  test('secret generate opens no database and writes no file', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-secret-'))
    try {
      // No JWT_SECRET in production: what a deployment lacks before its first start.
      const run = await wristband(['secret', 'generate'], { DATA_DIR: dir, NODE_ENV: 'production' })
      assert.equal(run.code, 0, run.stderr)
      assert.match(run.stdout.trim(), /^[A-Za-z0-9_-]{64}$/)
      assert.deepEqual(fs.readdirSync(dir), [])
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('wristband start-up failures: one line, no stack trace', { concurrency: true }, () => {
  const env = { JWT_SECRET: TEST_SECRET }
  let busy: net.Server
  let busyPort: number
  before(async () => {
    busy = net.createServer()
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve))
    busyPort = (busy.address() as net.AddressInfo).port
  })
  after(() => new Promise<void>((resolve) => busy.close(() => resolve())))

  test('PostgreSQL refusing connections', async () => {
    const url = 'postgres://postgres:hunter2@127.0.0.1:1/nowhere'
    // serve --workers 2: the primary migrates before forking, and fails the same way.
    for (const command of [['migrate'], ['serve'], ['serve', '--workers', '2']]) {
      const workers: Record<string, string> = command.includes('--workers')
        ? { REDIS_URL: 'redis://127.0.0.1:1' }
        : {}
      const run = await wristband(command, { ...env, DATABASE_URL: url, ...workers })
      oneLine(
        run,
        EXIT_STATUS.database,
        /^wristband: cannot use the database postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/nowhere: connect ECONNREFUSED/,
      )
      assert.doesNotMatch(run.stderr, /hunter2|migration {2}failed/)
    }
  })

  test('PostgreSQL with a role that does not exist', {
    skip: PG ? false : 'needs TEST_DATABASE_URL',
  }, async () => {
    const url = new URL(PG!)
    url.username = 'no_such_role_wristband'
    url.password = 'x'
    const run = await wristband(['migrate'], { ...env, DATABASE_URL: url.toString() })
    oneLine(
      run,
      EXIT_STATUS.database,
      /cannot use the database .*: (role "no_such_role_wristband" does not exist|password authentication failed)/,
    )
  })

  test('the port in use', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-port-'))
    try {
      const run = await wristband(['serve'], {
        ...env,
        DATA_DIR: dir,
        HOST: '127.0.0.1',
        PORT: String(busyPort),
      })
      assert.equal(run.code, EXIT_STATUS.listen, run.stderr)
      assert.match(
        run.stderr,
        new RegExp(`^wristband: cannot listen on 127\\.0\\.0\\.1:${busyPort}: the port is in use`, 'm'),
      )
      assert.doesNotMatch(run.stderr, /\n\s+at /, 'a stack trace was printed')
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test('a DATA_DIR that takes no file is refused at start in one line naming it', async () => {
    // A file where the folder should be: what a wrong mount or a typo in a unit file leaves.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-datadir-'))
    try {
      const blocker = path.join(dir, 'not-a-folder')
      fs.writeFileSync(blocker, '')
      const dataDir = path.join(blocker, 'data')
      const run = await wristband(['serve'], {
        ...env,
        DATA_DIR: dataDir,
        DATABASE_URL: 'sqlite::memory:',
        HOST: '127.0.0.1',
        PORT: '0',
      })
      oneLine(
        run,
        EXIT_STATUS.dataDir,
        new RegExp(`^wristband: DATA_DIR ${dataDir.replaceAll('.', '\\.')} is not writable \\(ENOTDIR\\)`),
      )
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test('METRICS_PORT in use is named as METRICS_PORT', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-metrics-port-'))
    try {
      const run = await wristband(['serve'], {
        ...env,
        DATA_DIR: dir,
        HOST: '127.0.0.1',
        PORT: '0',
        METRICS_PORT: String(busyPort),
      })
      assert.equal(run.code, EXIT_STATUS.listen, run.stderr)
      assert.match(
        run.stderr,
        new RegExp(
          `^wristband: cannot listen on 127\\.0\\.0\\.1:${busyPort}: the port is in use by another process \\(METRICS_PORT\\)`,
          'm',
        ),
      )
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test('TRUST_PROXY=maybe is refused by the configuration check, not by a TypeError later', async () => {
    const run = await wristband(['serve'], { ...env, DATABASE_URL: 'sqlite::memory:', TRUST_PROXY: 'maybe' })
    assert.equal(run.code, EXIT_STATUS.setting, run.stderr)
    assert.match(run.stderr, /TRUST_PROXY: must be true, false, a hop count or .* got "maybe"/)
    assert.doesNotMatch(run.stderr, /TypeError|\n\s+at /)
  })

  test('a setting that looks like a typo of a known one is refused with "did you mean", exit 11', async () => {
    const run = await wristband(['migrate'], {
      ...env,
      DATABASE_URL: 'sqlite::memory:',
      JWT_SECRETS: TEST_SECRET,
      REDIS_URLS: 'redis://127.0.0.1:6379',
      LOGLEVEL: 'debug',
      PROT: '8080',
      WORKERS: '4',
      USER: 'wristband',
      SHELL: '/bin/sh',
      TERM: 'xterm',
    })
    assert.equal(run.code, EXIT_STATUS.unknownVariable, run.stderr)
    for (const [typo, meant] of [
      ['JWT_SECRETS', 'JWT_SECRET'],
      ['REDIS_URLS', 'REDIS_URL'],
      ['LOGLEVEL', 'LOG_LEVEL'],
      // Short names: two letters swapped count as one slip.
      ['PROT', 'PORT'],
    ])
      assert.match(
        run.stderr,
        new RegExp(`^wristband: ${typo}: not a setting of wristband; did you mean ${meant}\\?$`, 'm'),
      )
    assert.match(run.stderr, /warning: WORKERS is not a setting .*wristband serve --workers N/)
    // The variables every environment has are not taken for typos.
    assert.equal(run.stderr.trim().split('\n').length, 5, run.stderr)
    assert.doesNotMatch(run.stderr, /\n\s+at /)
  })
})

describe('refusals at start: one line, its own exit status', { concurrency: true }, () => {
  const env = { JWT_SECRET: TEST_SECRET }

  test('production without DATABASE_URL, or with it misspelt in any case, does not start on a new SQLite file', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-prod-db-'))
    try {
      const production = { ...PRODUCTION_ENV, ...env, DATA_DIR: dir, HOST: '127.0.0.1', PORT: '0' }
      oneLine(
        await wristband(['serve'], production),
        EXIT_STATUS.productionDatabase,
        /^wristband: DATABASE_URL: required when NODE_ENV=production/,
      )
      const typo = await wristband(['serve'], { ...production, Database_Url: 'postgres://db/app' })
      assert.equal(typo.code, EXIT_STATUS.unknownVariable, typo.stderr)
      assert.match(
        typo.stderr,
        /^wristband: Database_Url: settings are upper case; did you mean DATABASE_URL\?$/m,
      )
      assert.deepEqual(fs.readdirSync(dir), [], 'no database file was created')
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test('URLs with a scheme their setting cannot use are refused at start, not by a worker later', async () => {
    for (const [name, value, pattern] of [
      [
        'REDIS_URL',
        'http://127.0.0.1:6379',
        /^wristband: REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL/,
      ],
      ['REDIS_URL', 'redis+sentinel://127.0.0.1:26379', /^wristband: REDIS_URL: must be a redis:\/\//],
      ['SMTP_URL', 'http://127.0.0.1:25', /^wristband: SMTP_URL: must be a smtp:\/\/ or smtps:\/\/ URL/],
    ] as const)
      oneLine(
        await wristband(['serve'], { ...env, DATABASE_URL: 'sqlite::memory:', PORT: '0', [name]: value }),
        EXIT_STATUS.urlScheme,
        pattern,
      )
  })

  test('DATABASE_SCHEMA with the database down: one line', async () => {
    for (const command of [['serve'], ['migrate'], ['migrate', '--status']])
      oneLine(
        await wristband(command, {
          ...env,
          DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere',
          DATABASE_SCHEMA: 'wristband_app',
          PORT: '0',
        }),
        EXIT_STATUS.database,
        /^wristband: cannot use the database postgres:\/\/postgres@127\.0\.0\.1:1\/nowhere: connect ECONNREFUSED/,
      )
  })

  test('a secret given twice is refused; a production start takes every secret from systemd credentials', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-creds-'))
    try {
      const secretFile = path.join(dir, 'jwt')
      fs.writeFileSync(secretFile, `${TEST_SECRET}\n`)
      oneLine(
        await wristband(['migrate'], {
          ...env,
          JWT_SECRET_FILE: secretFile,
          DATABASE_URL: 'sqlite::memory:',
        }),
        EXIT_STATUS.secretSource,
        /^wristband: JWT_SECRET: given twice \(JWT_SECRET and JWT_SECRET_FILE\); keep one$/,
      )
      // As the shipped unit runs it: no secret in the environment, each a file of LoadCredential=.
      const creds = path.join(dir, 'credentials')
      fs.mkdirSync(creds, { mode: 0o700 })
      fs.writeFileSync(path.join(creds, 'jwt-secret'), `${TEST_SECRET}\n`)
      fs.writeFileSync(path.join(creds, 'edge-signing-key'), PRODUCTION_ENV.EDGE_SIGNING_KEY!)
      fs.writeFileSync(path.join(creds, 'database-url'), `sqlite:${path.join(dir, 'wristband.db')}\n`)
      const { EDGE_SIGNING_KEY: _fromCredential, ...production } = PRODUCTION_ENV
      const run = await wristband(['migrate'], { ...production, CREDENTIALS_DIRECTORY: creds })
      assert.equal(run.code, 0, run.stderr)
      assert.ok(fs.existsSync(path.join(dir, 'wristband.db')), 'the database named by the credential')
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test('a backup into a folder that does not exist, or that is a file: one line', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-backup-target-'))
    try {
      const base = { ...env, DATABASE_URL: `sqlite:${path.join(dir, 'wristband.db')}` }
      assert.equal((await wristband(['migrate'], base)).code, 0)
      const missing = path.join(dir, 'no-such-folder')
      oneLine(
        await wristband(['backup', path.join(missing, 'copy.db')], base),
        EXIT_STATUS.backupTarget,
        new RegExp(`^wristband backup: the folder ${missing} does not exist \\(create it first\\)$`),
      )
      const file = path.join(dir, 'a-file')
      fs.writeFileSync(file, '')
      oneLine(
        await wristband(['backup', path.join(file, 'copy.db')], base),
        EXIT_STATUS.backupTarget,
        /^wristband backup: the folder .*a-file is not a folder$/,
      )
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  // The machine's own node (Debian's) may be older than 22: what a unit pointing at /usr/bin/node runs.
  const oldNode = ['/usr/bin/node', '/usr/local/bin/node'].find((bin) => {
    const r = spawnSync(bin, ['-e', 'process.stdout.write(process.versions.node)'], { encoding: 'utf8' })
    return r.status === 0 && Number(r.stdout.split('.')[0]) < 22
  })
  test('an unsupported Node is refused in one line before any native module loads', {
    skip: oldNode ? false : 'no Node older than 22 on this machine (/usr/bin/node): nothing to refuse',
  }, () => {
    const r = spawnSync(oldNode!, [BIN, 'serve'], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', ...env, DATABASE_URL: 'sqlite::memory:', PORT: '0' },
    })
    oneLine(
      { code: r.status, stdout: r.stdout, stderr: r.stderr },
      EXIT_STATUS.node,
      /^wristband: Node \d+\.\d+\.\d+ is not supported: Node 22, 24 or 26 is needed/,
    )
    assert.equal(r.signal, null, 'no crash')
  })
})
