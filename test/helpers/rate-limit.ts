import assert from 'node:assert/strict'
import type { InjectOptions } from 'fastify'
import { nextAddress, type TestApp } from './app.js'

/**
 * Sends `limit` requests from one address, then one more, and checks that only the extra one is
 * answered 429 with the documented body and Retry-After header. The test clock stands still meanwhile:
 * with Redis the windows are aligned to the clock (floor(now / window)), and a burst that crossed a
 * minute boundary would be counted in two windows.
 */
export async function assertPerMinuteLimit(
  t: TestApp,
  limit: number,
  request: () => InjectOptions & { token?: string },
): Promise<void> {
  t.clock.freeze()
  try {
    await sendUpToLimit(t, limit, request)
  } finally {
    t.clock.thaw()
  }
}

async function sendUpToLimit(
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
