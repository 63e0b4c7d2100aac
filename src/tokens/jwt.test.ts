import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { TestClock } from '../../test/helpers/clock.js'
import { JwtCodec } from './jwt.js'

const SECRET = 'a-test-secret-of-more-than-32-characters'

function codec(clock = new TestClock()) {
  return new JwtCodec({ secret: SECRET, previousSecrets: [], audience: 'aud', issuer: 'iss', clock })
}

describe('JwtCodec.tryVerify: remembered outcomes never outlive the token', () => {
  for (const [what, extra] of [
    ['a short token (remembered)', {}],
    ['a token longer than the remembered ones', { padding: 'x'.repeat(4000) }],
  ] as const) {
    test(`${what}: valid on every call until exp, then invalid`, () => {
      const clock = new TestClock()
      const jwt = codec(clock)
      const { token, claims } = jwt.issue({ type: 'access', sub: '1', ...extra }, 60)
      assert.deepEqual(jwt.tryVerify(token), claims)
      assert.deepEqual(jwt.tryVerify(token), claims)
      clock.advance(59_000)
      assert.deepEqual(jwt.tryVerify(token), claims)
      clock.advance(1_000)
      assert.equal(jwt.tryVerify(token), null)
    })
  }

  test('a refused token stays refused; a good one checked after many others is still good', () => {
    const jwt = codec()
    const { token } = jwt.issue({ type: 'access', sub: '1' }, 60)
    const forged = `${token.slice(0, -3)}${token.endsWith('AAA') ? 'BBB' : 'AAA'}`
    assert.equal(jwt.tryVerify(forged), null)
    assert.equal(jwt.tryVerify(forged), null)
    // More distinct tokens than the cache holds: the first ones are dropped and checked again.
    for (let i = 0; i < 10_050; i++) jwt.tryVerify(`${forged}${i}`)
    assert.equal(jwt.tryVerify(token)?.sub, '1')
    assert.equal(jwt.tryVerify(forged), null)
  })
})
