import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, test } from 'node:test'
import { PRODUCTION_ENV } from '../../test/helpers/app.js'
import { ConfigError, loadConfig } from './config.js'

const SECRET = 'x'.repeat(32)

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
    assert.equal(message.split('\n').length, problems.length + 1)
  })

  test('NODE_ENV=production refuses to start without JWT_SECRET', () => {
    const problems = problemsOf({ ...PRODUCTION_ENV })
    assert.equal(problems.length, 1)
    assert.match(problems[0]!, /^JWT_SECRET: required when NODE_ENV=production/)
    assert.equal(loadConfig({ ...PRODUCTION_ENV, JWT_SECRET: SECRET }).JWT_SECRET, SECRET)
  })

  test('production refuses mail and SMS to the outbox unless told MAIL_TRANSPORT=outbox, and a missing EDGE_SIGNING_KEY', () => {
    const problems = problemsOf({ NODE_ENV: 'production', JWT_SECRET: SECRET })
    assert.equal(problems.length, 3, problems.join('\n'))
    assert.match(problems[0]!, /^SMTP_URL: required when NODE_ENV=production \(or MAIL_TRANSPORT=outbox/)
    assert.match(problems[1]!, /^SMS_WEBHOOK_URL: required when NODE_ENV=production/)
    assert.match(problems[2]!, /^EDGE_SIGNING_KEY: required when NODE_ENV=production/)
    const EDGE_SIGNING_KEY = PRODUCTION_ENV.EDGE_SIGNING_KEY!
    // Real transports, or the files asked for by name.
    const withTransports = {
      NODE_ENV: 'production',
      JWT_SECRET: SECRET,
      EDGE_SIGNING_KEY,
      SMTP_URL: 'smtp://mail.example.com:587',
      SMS_WEBHOOK_URL: 'https://sms.example.com/send',
    }
    assert.equal(loadConfig(withTransports).SMTP_URL, 'smtp://mail.example.com:587')
    assert.equal(loadConfig({ ...PRODUCTION_ENV, JWT_SECRET: SECRET }).MAIL_TRANSPORT, 'outbox')
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
