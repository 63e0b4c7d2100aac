import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { PRODUCTION_ENV } from '../../test/helpers/app.js'
import { ConfigError, loadConfig } from '../platform/config.js'

/** WEBAUTHN_RP_ID, WEBAUTHN_ORIGINS and PASSKEYS_REQUIRED_FOR, checked at start. */
const SECRET = 'a-production-secret-of-at-least-32-bytes'
/** What production needs besides (the edge key, mail and SMS as files), so only the passkey settings differ. */
const PRODUCTION = {
  ...PRODUCTION_ENV,
  JWT_SECRET: SECRET,
  DATABASE_URL: 'postgres://wristband@db.example.com/wristband',
}

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env)
    return []
  } catch (err) {
    if (err instanceof ConfigError) return err.problems
    throw err
  }
}

describe('passkey settings', () => {
  test('development: the RP ID and origins follow PUBLIC_BASE_URL; localhost for an address', () => {
    const local = loadConfig({})
    assert.equal(local.WEBAUTHN_RP_ID, 'localhost')
    assert.deepEqual(local.WEBAUTHN_ORIGINS, ['https://localhost', 'http://localhost:8000'])
    assert.equal(local.PASSKEYS_REQUIRED_FOR, 'none')
    const named = loadConfig({ PUBLIC_BASE_URL: 'https://tickets.example.com/base' })
    assert.equal(named.WEBAUTHN_RP_ID, 'tickets.example.com')
    assert.deepEqual(named.WEBAUTHN_ORIGINS, ['https://tickets.example.com'])
  })

  test('production: passkeys are off without an RP ID, and refused at start when asked for', () => {
    const off = loadConfig(PRODUCTION)
    assert.equal(off.WEBAUTHN_RP_ID, undefined)
    assert.deepEqual(off.WEBAUTHN_ORIGINS, [])
    const asks: Record<string, string>[] = [
      { PASSKEYS_REQUIRED_FOR: 'admins' },
      { WEBAUTHN_ORIGINS: 'https://example.com' },
    ]
    for (const asked of asks) {
      const problems = problemsOf({ ...PRODUCTION, ...asked })
      assert.equal(problems.length, 1, problems.join('\n'))
      assert.match(problems[0]!, /^WEBAUTHN_RP_ID: required in production when passkeys are on/)
    }
    const on = loadConfig({
      ...PRODUCTION,
      WEBAUTHN_RP_ID: 'example.com',
      PASSKEYS_REQUIRED_FOR: 'superadmin',
    })
    assert.deepEqual(on.WEBAUTHN_ORIGINS, ['https://example.com'])
  })

  test('an RP ID that is no host name, and origins off the RP ID or not https, are refused', () => {
    for (const rp of ['https://example.com', 'example.com:443', '10.0.0.1', 'exa mple.com'])
      assert.match(problemsOf({ WEBAUTHN_RP_ID: rp })[0] ?? '', /^WEBAUTHN_RP_ID: must be a host name/, rp)
    const problems = problemsOf({
      WEBAUTHN_RP_ID: 'example.com',
      WEBAUTHN_ORIGINS:
        'https://dash.example.com,https://example.org,http://example.com,https://example.com/path',
    })
    assert.deepEqual(
      problems.map((p) => p.split(':')[0]),
      ['WEBAUTHN_ORIGINS'],
    )
    assert.match(problems[0]!, /must be origins \(no path\)/)
    const two = problemsOf({
      WEBAUTHN_RP_ID: 'example.com',
      WEBAUTHN_ORIGINS: 'https://dash.example.com,https://example.org,http://example.com',
    })
    assert.deepEqual(two, [
      'WEBAUTHN_ORIGINS: https://example.org is not on WEBAUTHN_RP_ID example.com',
      'WEBAUTHN_ORIGINS: http://example.com must be https (browsers allow http for localhost only)',
    ])
    assert.match(
      problemsOf({ PASSKEYS_REQUIRED_FOR: 'everyone' })[0] ?? '',
      /^PASSKEYS_REQUIRED_FOR: must be one of none, superadmin, admins/,
    )
  })
})
