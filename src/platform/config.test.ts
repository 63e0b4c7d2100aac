import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, describe, test } from 'node:test'
import { PRODUCTION_ENV } from '../../test/helpers/app.js'
import {
  ConfigError,
  configWarnings,
  credentialName,
  loadConfig,
  SECRET_SETTINGS,
  settings,
} from './config.js'
import { EXIT_STATUS } from './startup.js'

const SECRET = 'x'.repeat(32)
/** Production refuses to start without a DATABASE_URL (exit 12): the cases below are about other settings. */
const PROD_DB = { DATABASE_URL: 'postgres://wristband@db.example.com/wristband' }

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env)
  } catch (err) {
    assert.ok(err instanceof ConfigError)
    return err.problems
  }
  assert.fail('configuration was accepted')
}

describe('configuration', () => {
  test('defaults: nothing to set for a local start', () => {
    const c = loadConfig({})
    assert.equal(c.HOST, '127.0.0.1')
    assert.equal(c.PORT, 8000)
    assert.equal(c.DATA_DIR, './data')
    assert.equal(c.databaseUrl, `sqlite:${path.join('./data', 'wristband.db')}`)
    assert.equal(c.REDIS_URL, undefined)
    assert.equal(c.JWT_SECRET, undefined)
    assert.equal(c.JWT_AUDIENCE, 'wristband')
    assert.equal(c.JWT_ISSUER, 'wristband')
    assert.equal(c.ACCESS_TOKEN_EXPIRE_MINUTES, 15)
    assert.equal(c.REFRESH_TOKEN_EXPIRE_DAYS, 30)
    assert.equal(c.OFFLINE_TOKEN_EXPIRE_HOURS, 72)
    assert.equal(c.MFA_FRESHNESS_WINDOW_HOURS, 8)
    assert.equal(c.PASSWORD_RESET_EXPIRE_MINUTES, 30)
    assert.equal(c.PASSWORD_RESET_HOURLY_QUOTA, 3)
    assert.deepEqual(c.TRUST_PROXY, ['loopback', 'linklocal', 'uniquelocal'])
    assert.equal(c.WEBHOOK_ALLOW_PRIVATE, false)
    assert.equal(c.TRANSFER_EMAIL_DELAY_SECONDS, 60)
    assert.deepEqual(c.JWT_PREVIOUS_SECRETS, [])
    assert.ok(Object.isFrozen(c))
  })

  test('values are parsed; an empty variable means the default', () => {
    const c = loadConfig({
      PORT: '9000',
      TRUST_PROXY: 'false',
      DATA_DIR: '/srv/wb',
      ACCESS_TOKEN_EXPIRE_MINUTES: '',
    })
    assert.equal(c.PORT, 9000)
    assert.equal(c.TRUST_PROXY, false)
    assert.equal(c.databaseUrl, 'sqlite:/srv/wb/wristband.db')
    assert.equal(c.ACCESS_TOKEN_EXPIRE_MINUTES, 15)
    assert.equal(loadConfig({ TRUST_PROXY: '2' }).TRUST_PROXY, 2)
    assert.deepEqual(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 127.0.0.1' }).TRUST_PROXY, [
      '10.0.0.0/8',
      '127.0.0.1',
    ])
    assert.equal(loadConfig({ TRUST_PROXY: 'true' }).TRUST_PROXY, true)
    assert.throws(() => loadConfig({ TRUST_PROXY: 'loopback,proxy.internal' }), /proxy\.internal/)
    assert.throws(() => loadConfig({ TRUST_PROXY: '10.0.0.0/8/8' }), /TRUST_PROXY/)
    assert.equal(loadConfig({ DATABASE_URL: 'postgres://u@h/db' }).databaseUrl, 'postgres://u@h/db')
  })

  test('every bad value is reported at once, one line each, naming the setting', () => {
    const problems = problemsOf({
      PORT: '80a',
      LOG_LEVEL: 'verbose',
      REDIS_URL: 'not a url',
      ACCESS_TOKEN_EXPIRE_MINUTES: '-5',
      WEBHOOK_ALLOW_PRIVATE: 'maybe',
      WEBHOOK_RETRY_SCHEDULE: '5,x',
      DATABASE_URL: 'mysql://h/db',
    })
    const names = problems.map((p) => p.split(':')[0])
    assert.deepEqual(names.sort(), [
      'ACCESS_TOKEN_EXPIRE_MINUTES',
      'DATABASE_URL',
      'LOG_LEVEL',
      'PORT',
      'REDIS_URL',
      'WEBHOOK_ALLOW_PRIVATE',
      'WEBHOOK_RETRY_SCHEDULE',
    ])
    for (const p of problems) assert.ok(!p.includes('\n'), `one line: ${p}`)
    assert.ok(problems.find((p) => p.startsWith('PORT'))?.includes('80a'), 'the bad value is quoted')
    const message = new ConfigError(problems).message
    assert.equal(message.split('\n').length, problems.length)
  })

  test('NODE_ENV=production refuses to start without JWT_SECRET', () => {
    const problems = problemsOf({ ...PRODUCTION_ENV, ...PROD_DB })
    assert.equal(problems.length, 1)
    assert.match(problems[0]!, /^JWT_SECRET: required when NODE_ENV=production/)
    assert.equal(loadConfig({ ...PRODUCTION_ENV, ...PROD_DB, JWT_SECRET: SECRET }).JWT_SECRET, SECRET)
  })

  test('production refuses mail and SMS to the outbox unless told MAIL_TRANSPORT=outbox, and a missing EDGE_SIGNING_KEY', () => {
    const problems = problemsOf({ NODE_ENV: 'production', JWT_SECRET: SECRET, ...PROD_DB })
    assert.equal(problems.length, 3, problems.join('\n'))
    assert.match(problems[0]!, /^SMTP_URL: required when NODE_ENV=production \(or MAIL_TRANSPORT=outbox/)
    assert.match(problems[1]!, /^SMS_WEBHOOK_URL: required when NODE_ENV=production/)
    assert.match(problems[2]!, /^EDGE_SIGNING_KEY: required when NODE_ENV=production/)
    const EDGE_SIGNING_KEY = PRODUCTION_ENV.EDGE_SIGNING_KEY!
    // Real transports, or the files asked for by name.
    const withTransports = {
      ...PROD_DB,
      NODE_ENV: 'production',
      JWT_SECRET: SECRET,
      EDGE_SIGNING_KEY,
      SMTP_URL: 'smtp://mail.example.com:587',
      SMS_WEBHOOK_URL: 'https://sms.example.com/send',
    }
    assert.equal(loadConfig(withTransports).SMTP_URL, 'smtp://mail.example.com:587')
    assert.equal(loadConfig({ ...PRODUCTION_ENV, ...PROD_DB, JWT_SECRET: SECRET }).MAIL_TRANSPORT, 'outbox')
    // SMTP alone still leaves SMS to a folder nobody reads.
    assert.match(
      problemsOf({ ...withTransports, SMS_WEBHOOK_URL: '' })[0]!,
      /^SMS_WEBHOOK_URL: required when NODE_ENV=production/,
    )
    assert.match(problemsOf({ MAIL_TRANSPORT: 'smtp' })[0]!, /^MAIL_TRANSPORT: smtp needs SMTP_URL/)
    // Outside production the outbox stays the silent default.
    assert.equal(loadConfig({}).MAIL_TRANSPORT, undefined)
  })

  test('a JWT_SECRET (or previous secret) shorter than 32 bytes is refused', () => {
    assert.match(problemsOf({ JWT_SECRET: 'x'.repeat(31) })[0]!, /^JWT_SECRET: must be at least 32 bytes/)
    // Bytes, not characters: 16 two-byte characters are 32 bytes.
    assert.equal(loadConfig({ JWT_SECRET: 'é'.repeat(16) }).JWT_SECRET, 'é'.repeat(16))
    assert.match(
      problemsOf({ JWT_SECRET: SECRET, JWT_PREVIOUS_SECRETS: `${SECRET},short` })[0]!,
      /^JWT_PREVIOUS_SECRETS/,
    )
  })
})

describe('Redis through Sentinel', () => {
  test('REDIS_SENTINELS and REDIS_SENTINEL_MASTER resolve to the sentinels and the master, with their passwords', () => {
    const c = loadConfig({
      REDIS_SENTINELS: 'sentinel-a:26379, 10.0.0.2:26380,[::1]:26381',
      REDIS_SENTINEL_MASTER: 'wristband',
      REDIS_PASSWORD: 'data-pass',
      REDIS_SENTINEL_PASSWORD: 'sentinel-pass',
    })
    assert.deepEqual(c.redis, {
      sentinels: [
        { host: 'sentinel-a', port: 26379 },
        { host: '10.0.0.2', port: 26380 },
        { host: '::1', port: 26381 },
      ],
      master: 'wristband',
      password: 'data-pass',
      sentinelPassword: 'sentinel-pass',
    })
    assert.deepEqual(loadConfig({ REDIS_URL: 'redis://h:6379' }).redis, { url: 'redis://h:6379' })
    assert.equal(loadConfig({}).redis, undefined)
  })

  test('a bad list, a missing master name, both ways at once or a Sentinel setting without sentinels are refused, naming the setting', () => {
    for (const bad of ['sentinel-a', 'sentinel-a:0', 'a:26379,b', 'a:99999', ',', '::1:26379'])
      assert.match(
        problemsOf({ REDIS_SENTINELS: bad, REDIS_SENTINEL_MASTER: 'm' }).join('\n'),
        /^REDIS_SENTINELS: must/,
        bad,
      )
    assert.match(problemsOf({ REDIS_SENTINELS: 'a:26379' }).join('\n'), /^REDIS_SENTINEL_MASTER: required/)
    assert.match(
      problemsOf({ REDIS_URL: 'redis://h', REDIS_SENTINELS: 'a:26379', REDIS_SENTINEL_MASTER: 'm' }).join(
        '\n',
      ),
      /either REDIS_URL or REDIS_SENTINELS/,
    )
    assert.deepEqual(
      problemsOf({ REDIS_URL: 'redis://h', REDIS_PASSWORD: 'p', REDIS_SENTINEL_MASTER: 'm' })
        .map((p) => p.split(':')[0])
        .sort(),
      ['REDIS_PASSWORD', 'REDIS_SENTINEL_MASTER'],
    )
  })
})

/** The refusal's lines and exit status. */
function refusalOf(env: Record<string, string>): { problems: string[]; status: number } {
  try {
    loadConfig(env)
  } catch (err) {
    assert.ok(err instanceof ConfigError)
    return { problems: err.problems, status: err.exitStatus }
  }
  assert.fail('configuration was accepted')
}

describe('refusals at start, each with its exit status', () => {
  test('production without DATABASE_URL is refused (12); SQLite in production only when named', () => {
    const env = { ...PRODUCTION_ENV, JWT_SECRET: SECRET }
    const r = refusalOf(env)
    assert.equal(r.status, EXIT_STATUS.productionDatabase)
    assert.match(r.problems[0]!, /^DATABASE_URL: required when NODE_ENV=production/)
    const named = loadConfig({ ...env, DATABASE_URL: 'sqlite:/var/lib/wristband/wristband.db' })
    assert.equal(named.databaseUrl, 'sqlite:/var/lib/wristband/wristband.db')
    // Outside production the SQLite default stays: `npm start` needs no setting.
    assert.match(loadConfig({}).databaseUrl, /^sqlite:/)
  })

  test('a setting in the wrong case, a near-miss or a name with the service prefix is refused (11)', () => {
    for (const [name, pattern] of [
      ['Database_Url', /^Database_Url: settings are upper case; did you mean DATABASE_URL\?/],
      ['database_url', /did you mean DATABASE_URL\?/],
      ['JWT_SECRETS', /^JWT_SECRETS: not a setting of wristband; did you mean JWT_SECRET\?/],
      ['redis_urls', /did you mean REDIS_URL\?/],
      ['PROT', /did you mean PORT\?/],
      ['JWT_SERCET', /did you mean JWT_SECRET\?/],
      ['SMTP_TIMOUT_SECOND', /did you mean SMTP_TIMEOUT_SECONDS\?/],
      ['EDGE_SIGNING_KEY_PEM', /^EDGE_SIGNING_KEY_PEM: not a setting of wristband/],
      ['REDIS_HOST', /^REDIS_HOST: not a setting of wristband/],
    ] as const) {
      const r = refusalOf({ [name]: 'x' })
      assert.equal(r.status, EXIT_STATUS.unknownVariable, name)
      assert.match(r.problems[0]!, pattern)
    }
    // What every environment has, Kubernetes' service links and the secret files are no typos.
    loadConfig({
      PATH: '/usr/bin',
      HOME: '/root',
      USER: 'wristband',
      SHELL: '/bin/sh',
      TERM: 'xterm',
      HOSTNAME: 'vm',
      LANG: 'C.UTF-8',
      NODE_OPTIONS: '--max-old-space-size=512',
      npm_config_cache: '/tmp/npm',
      REDIS_PORT: 'tcp://10.0.0.11:6379',
      REDIS_SERVICE_HOST: '10.0.0.11',
      REDIS_PORT_6379_TCP_ADDR: '10.0.0.11',
      WORKERS: '4',
    })
  })

  test('URL settings with a scheme they cannot use are refused (13), without repeating the value', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [
        { REDIS_URL: 'http://:hunter2@cache:6379' },
        /^REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL, got http:\/\/…$/,
      ],
      [{ REDIS_URL: 'redis+sentinel://cache:26379' }, /^REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL/],
      [{ SMTP_URL: 'http://mail:25' }, /^SMTP_URL: must be a smtp:\/\/ or smtps:\/\/ URL/],
      [
        { DATABASE_URL: 'mysql://db/app' },
        /^DATABASE_URL: must start with postgres:\/\/, postgresql:\/\/ or sqlite:, got mysql:/,
      ],
      [{ PUBLIC_BASE_URL: 'ftp://example.com' }, /^PUBLIC_BASE_URL: must be a http:\/\/ or https:\/\/ URL/],
      [
        {
          ...PRODUCTION_ENV,
          ...PROD_DB,
          JWT_SECRET: SECRET,
          MAIL_TRANSPORT: '',
          SMTP_URL: 'smtps://mail:465',
          SMS_WEBHOOK_URL: 'http://sms.example.com/send',
        },
        /^SMS_WEBHOOK_URL: must be an https:\/\/ URL when NODE_ENV=production$/,
      ],
    ]
    for (const [env, pattern] of cases) {
      const r = refusalOf(env)
      assert.equal(r.status, EXIT_STATUS.urlScheme, JSON.stringify(env))
      assert.equal(r.problems.length, 1, r.problems.join('\n'))
      assert.match(r.problems[0]!, pattern)
      assert.doesNotMatch(r.problems[0]!, /hunter2/)
    }
    for (const ok of ['redis://cache:6379', 'rediss://cache:6380'])
      assert.equal(loadConfig({ REDIS_URL: ok }).REDIS_URL, ok)
    assert.equal(loadConfig({ SMTP_URL: 'smtps://u:p@mail:465' }).SMTP_URL, 'smtps://u:p@mail:465')
    assert.equal(loadConfig({ DATABASE_URL: 'postgresql://db/app' }).databaseUrl, 'postgresql://db/app')
  })

  test('several problems: one line each, the exit status of the first', () => {
    const r = refusalOf({ Database_Url: 'x', PORT: 'eighty' })
    assert.equal(r.problems.length, 2)
    assert.equal(r.status, EXIT_STATUS.unknownVariable)
    assert.equal(new ConfigError(r.problems).message.split('\n').length, 2)
  })
})

describe('secrets from files', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-secrets-'))
  after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const write = (name: string, content: string) => {
    const file = path.join(dir, name)
    fs.writeFileSync(file, content, { mode: 0o600 })
    return file
  }

  test('NAME_FILE: the file holds the value, its trailing newline dropped', () => {
    const file = write('jwt', `${SECRET}\n`)
    assert.equal(loadConfig({ JWT_SECRET_FILE: file }).JWT_SECRET, SECRET)
    const pem = PRODUCTION_ENV.EDGE_SIGNING_KEY!
    const key = loadConfig({ EDGE_SIGNING_KEY_FILE: write('edge.pem', `${pem}\n`) }).EDGE_SIGNING_KEY
    assert.equal(key?.asymmetricKeyType, 'ed25519')
    const url = write('db-url', 'postgres://app:hunter2@db/app\n')
    assert.equal(loadConfig({ DATABASE_URL_FILE: url }).databaseUrl, 'postgres://app:hunter2@db/app')
  })

  test('systemd credentials: $CREDENTIALS_DIRECTORY/<name in lower case, - for _>', () => {
    const creds = fs.mkdtempSync(path.join(dir, 'creds-'))
    fs.writeFileSync(path.join(creds, 'jwt-secret'), SECRET)
    fs.writeFileSync(path.join(creds, 'smtp-url'), 'smtp://u:p@mail:587\n')
    const c = loadConfig({ CREDENTIALS_DIRECTORY: creds })
    assert.equal(c.JWT_SECRET, SECRET)
    assert.equal(c.SMTP_URL, 'smtp://u:p@mail:587')
    assert.equal(credentialName('SMS_WEBHOOK_AUTHORIZATION'), 'sms-webhook-authorization')
    // Only secrets have a file form: that of another setting is refused as no setting.
    for (const name of SECRET_SETTINGS) assert.ok(name in settings, name)
    const r = refusalOf({ DATABASE_SCHEMA_FILE: write('schema', 'app') })
    assert.equal(r.status, EXIT_STATUS.unknownVariable)
  })

  test('two sources of one secret, or a file that cannot be read, are refused (14)', () => {
    const file = write('jwt2', SECRET)
    const creds = fs.mkdtempSync(path.join(dir, 'creds-'))
    fs.writeFileSync(path.join(creds, 'jwt-secret'), SECRET)
    for (const [env, pattern] of [
      [
        { JWT_SECRET: SECRET, JWT_SECRET_FILE: file },
        /^JWT_SECRET: given twice \(JWT_SECRET and JWT_SECRET_FILE\); keep one$/,
      ],
      [
        { JWT_SECRET: SECRET, CREDENTIALS_DIRECTORY: creds },
        /given twice \(JWT_SECRET and the credential jwt-secret\)/,
      ],
      [
        { JWT_SECRET_FILE: path.join(dir, 'missing') },
        /^JWT_SECRET: cannot read .*missing \(JWT_SECRET_FILE\): ENOENT$/,
      ],
    ] as const) {
      const r = refusalOf(env)
      assert.equal(r.status, EXIT_STATUS.secretSource, JSON.stringify(env))
      assert.equal(r.problems.length, 1, r.problems.join('\n'))
      assert.match(r.problems[0]!, pattern)
    }
  })
})

describe('settings that do not fit together are told at start', () => {
  const warned = (env: Record<string, string>) => configWarnings(loadConfig({ NODE_ENV: 'test', ...env }))
  test('PUBLIC_BASE_URL on loopback at another port than PORT', () => {
    const [w, ...rest] = warned({ PORT: '9000', PUBLIC_BASE_URL: 'http://127.0.0.1:8000' })
    assert.match(w ?? '', /PUBLIC_BASE_URL \(http:\/\/127\.0\.0\.1:8000\) .* PORT 9000/)
    assert.deepEqual(rest, [])
    assert.equal(
      warned({ PORT: '9000', PUBLIC_BASE_URL: 'http://localhost' }).length,
      1,
      'port 80 by default',
    )
    assert.equal(warned({ PORT: '9000', PUBLIC_BASE_URL: 'http://[::1]:8080' }).length, 1)
  })
  test('no warning when they agree, for a public host (a proxy may map ports) or PORT 0', () => {
    assert.deepEqual(warned({}), [])
    assert.deepEqual(warned({ PORT: '9000' }), [], 'unset, it follows PORT')
    assert.equal(loadConfig({ NODE_ENV: 'test', PORT: '9000' }).PUBLIC_BASE_URL, 'http://127.0.0.1:9000')
    assert.deepEqual(warned({ PORT: '9000', PUBLIC_BASE_URL: 'http://127.0.0.1:9000' }), [])
    assert.deepEqual(warned({ PORT: '9000', PUBLIC_BASE_URL: 'https://tickets.example.com' }), [])
    assert.deepEqual(warned({ PORT: '0' }), [])
  })
})
