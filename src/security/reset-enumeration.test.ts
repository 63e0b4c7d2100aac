import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { eventAdmin, forEachBackend, type TestApp, withStandardSeed } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { dumpDatabase } from '../../test/helpers/dump.js'

/**
 * `POST /admin/password-reset/email-send` does not tell whether an administrator has an address:
 * the hourly quota counts per submitted address, known or not, and a request does the same work
 * for both before answering (the job that follows finds out, after the answer). Jobs are polled
 * once a minute here, so what a request left behind is still there to be compared.
 */
forEachBackend(
  httpBackends,
  'password-reset e-mail-send does not reveal administrators',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed(
        withStandardSeed({
          administrators: [eventAdmin('known@example.com'), eventAdmin('known2@example.com')],
        }),
      )
    })
    const send = (email: string) =>
      t.request({ method: 'POST', url: '/admin/password-reset/email-send', payload: { email } })

    test('the 4th request of an hour is 429 for an unknown address exactly as for a known one', async () => {
      const answers: Record<string, { status: number[]; last: Record<string, unknown> }> = {}
      for (const email of ['known@example.com', 'unknown@example.com']) {
        const status: number[] = []
        let last: Record<string, unknown> = {}
        for (let i = 0; i < 4; i++) {
          const res = await send(email)
          status.push(res.statusCode)
          last = res.json()
          if (res.statusCode === 429) assert.equal(Number(res.headers['retry-after']), last.retry_after)
        }
        answers[email] = { status, last }
      }
      const known = answers['known@example.com']!
      const unknown = answers['unknown@example.com']!
      assert.deepEqual(known.status, [200, 200, 200, 429])
      assert.deepEqual(unknown.status, known.status, 'the quota tells known from unknown addresses')
      // Retry-After counts down with the clock; everything else is identical.
      const { retry_after: a, ...knownBody } = known.last
      const { retry_after: b, ...unknownBody } = unknown.last
      assert.deepEqual(unknownBody, knownBody)
      for (const s of [a, b]) assert.ok(typeof s === 'number' && s > 0 && s <= 3600)
    })

    test('a request for a known and for an unknown address change the database the same way before the answer', async () => {
      const rowCounts = async () =>
        new Map([...(await dumpDatabase(t.db))].map(([table, rows]) => [table, JSON.parse(rows).length]))
      const changes = async (email: string) => {
        const before = await rowCounts()
        assert.equal((await send(email)).statusCode, 200)
        const after = await rowCounts()
        return [...after]
          .filter(([table, n]) => n !== before.get(table))
          .map(([table, n]) => `${table} ${n - (before.get(table) ?? 0)}`)
          .sort()
      }
      const known = await changes('known2@example.com')
      const unknown = await changes('unknown2@example.com')
      assert.ok(known.length > 0)
      assert.deepEqual(unknown, known)
    })
  },
  // Jobs wait for the next poll, a minute away: nothing runs between a request and the check.
  { JOBS_POLL_MS: '60000' },
)
