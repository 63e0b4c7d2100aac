import assert from 'node:assert/strict'
import type { InjectOptions } from 'fastify'
import { nextAddress, type TestApp } from './app.js'

/**
 * Sends `limit` requests from one address, then one more, and checks that only the extra one is
 * answered 429 with the documented body and Retry-After header.
 */
export async function assertPerMinuteLimit(
  t: TestApp,
  limit: number,
  request: () => InjectOptions & { token?: string },
): Promise<void> {
  const address = nextAddress()
  const send = () => {
    const opts = request()
    return t.request({ ...opts, headers: { ...opts.headers, 'x-forwarded-for': address } })
  }
  for (let i = 0; i < limit; i++) {
    const res = await send()
    assert.notEqual(res.statusCode, 429, `request ${i + 1} of ${limit} was limited`)
  }
  const res = await send()
  assert.equal(res.statusCode, 429)
  const body = res.json()
  assert.equal(body.error, 'rate_limit_exceeded')
  assert.equal(body.limit, limit)
  assert.ok(Number(res.headers['retry-after']) > 0)
}
