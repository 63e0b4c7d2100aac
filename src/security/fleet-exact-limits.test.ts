import assert from 'node:assert/strict'
import { test } from 'node:test'
import { withTwoInstances } from '../../test/helpers/app.js'
import { backends, eachBackend } from '../../test/helpers/backends.js'

/**
 * With the background-synced counters (RATE_LIMIT_SYNC_MS, 100 ms by default), ten
 * failed logins from one address spread over two instances, then an eleventh, were answered 401: each
 * instance had seen five. Limits of 60 a minute or less are now counted in Redis on every request,
 * exact across the fleet, whatever the sync interval; only higher limits sync in the background.
 */
eachBackend(
  backends.filter((b) => b.name.includes('redis')),
  'a fleet sharing Redis',
  (backend) => {
    test('sequential logins across two instances meet the limit exactly', async () => {
      // The default sync interval, and one long enough that nothing would be shared by syncing.
      for (const sync of ['100', '60000']) {
        await withTwoInstances(backend, { RATE_LIMIT_SYNC_MS: sync }, async (a, b) => {
          const address = sync === '100' ? '198.51.100.30' : '198.51.100.31'
          // Unknown accounts, each its own: the answer is a plain 401, no account's back-off involved.
          const login = (n: number) =>
            (n % 2 === 0 ? a : b).request({
              method: 'POST',
              url: '/auth/login',
              payload: { email: `nobody-${sync}-${n}@example.com`, password: 'wrong-password-1' },
              headers: { 'x-forwarded-for': address },
            })
          for (let n = 0; n < 10; n++) assert.equal((await login(n)).statusCode, 401, `login ${n + 1}`)
          const eleventh = await login(10)
          assert.equal(eleventh.statusCode, 429, `RATE_LIMIT_SYNC_MS=${sync}: the eleventh login`)
          assert.equal(eleventh.json().error, 'rate_limit_exceeded')
          assert.equal(eleventh.json().limit, 10)
          assert.equal((await login(11)).statusCode, 429, 'the other instance refuses too')
        })
      }
    })
  },
)
