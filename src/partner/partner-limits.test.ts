import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, nextAddress, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { type PartnerKeys, seedPartner } from '../../test/helpers/partner.js'

/**
 * Partner limits are per API key (PARTNER_RATE_LIMIT, lowered here to 30 a minute), whatever
 * the addresses a partner's requests come from, and answered with RateLimit-Limit, -Remaining and -Reset.
 */
forEachBackend(
  httpBackends,
  'partner limits per API key',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
    })

    const get = (key: string, url = '/companies/tickets') =>
      t.request({ method: 'GET', url, headers: { api_key: key, 'x-forwarded-for': nextAddress() } })

    test("a key's requests count against its own limit from any address; another key keeps its budget", async () => {
      t.clock.freeze()
      try {
        const first = await get(keys.rival)
        assert.equal(first.statusCode, 200)
        assert.equal(first.headers['ratelimit-limit'], '30')
        assert.equal(first.headers['ratelimit-remaining'], '29')
        assert.ok(Number(first.headers['ratelimit-reset']) >= 1)
        // One budget over every partner route.
        for (let i = 2; i <= 30; i++) {
          const res = await get(keys.rival, i % 2 ? '/companies/tickets' : '/companies/webhook')
          assert.notEqual(res.statusCode, 429, `request ${i} was limited`)
        }
        const refused = await get(keys.rival, '/companies/transfer/T-404')
        assert.equal(refused.statusCode, 429)
        assert.equal(refused.headers['ratelimit-remaining'], '0')
        assert.ok(Number(refused.headers['retry-after']) >= 1)
        assert.equal(refused.json().error, 'rate_limit_exceeded')
        assert.equal(refused.json().limit, 30)
        // Another partner's key (and the same partner's other key) is not affected.
        assert.equal((await get(keys.write)).statusCode, 200)
        assert.equal((await get(keys.read)).statusCode, 200)
        assert.equal((await get(keys.other)).statusCode, 200)
      } finally {
        t.clock.thaw()
      }
    })
  },
  { PARTNER_RATE_LIMIT: '30' },
)
