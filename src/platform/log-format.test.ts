import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, startApp, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

forEachBackend(httpBackends.slice(0, 1), 'log lines', (ctx) => {
  let t: TestApp
  before(() => {
    t = ctx()
  })
  const lines = () => t.logs.map((l) => JSON.parse(l) as Record<string, unknown>)

  test('carry the level as a name and the time in ISO 8601 (UTC)', async () => {
    const res = await t.request({
      method: 'GET',
      url: '/',
      headers: { 'x-request-id': 'log-format-1' },
    })
    assert.equal(res.statusCode, 200)
    const mine = lines().filter((l) => l.reqId === 'log-format-1')
    assert.deepEqual(
      mine.map((l) => l.msg),
      ['incoming request', 'request completed'],
    )
    for (const l of mine) {
      assert.equal(l.level, 'info')
      assert.match(String(l.time), ISO)
      assert.ok(Math.abs(Date.parse(String(l.time)) - Date.now()) < 3_600_000, 'a time of today')
    }
    const req = mine[0]!.req as { method: string; url: string; ip: string }
    assert.deepEqual([req.method, req.url, typeof req.ip], ['GET', '/', 'string'])
    // The completed line names method, route and status on its own.
    assert.deepEqual(mine[1]!.res, { method: 'GET', route: '/', statusCode: 200 })
    assert.equal(typeof mine[1]!.responseTime, 'number')
  })

  test('POST /tokens/verify is not logged at info (it is the busiest call); others are', async () => {
    const before = t.logs.length
    await t.request({ method: 'POST', url: '/tokens/verify', payload: { token: 'x' } })
    assert.equal(t.logs.length, before)
  })

  test('the /health and /ready probes are not logged at info either', async () => {
    const before = t.logs.length
    await t.request({ method: 'GET', url: '/health' })
    await t.request({ method: 'GET', url: '/ready' })
    assert.deepEqual(t.logs.slice(before), [])
  })

  test('the completed line of a request no route matched says so', async () => {
    const res = await t.request({
      method: 'GET',
      url: '/no/such/page',
      headers: { 'x-request-id': 'log-format-2' },
    })
    assert.equal(res.statusCode, 404)
    const done = lines().find((l) => l.reqId === 'log-format-2' && l.msg === 'request completed')
    assert.deepEqual(done?.res, { method: 'GET', route: 'unmatched', statusCode: 404 })
  })

  test('once listening, one line names the URLs of /docs and /dashboard', async () => {
    await t.app.listen({ host: '127.0.0.1', port: 0 })
    const { port } = t.app.server.address() as { port: number }
    const line = lines().find((l) => l.docs !== undefined)
    assert.ok(line, 'no start-up line')
    assert.equal(line.level, 'info')
    assert.equal(line.docs, `http://127.0.0.1:${port}/docs`)
    assert.equal(line.dashboard, `http://127.0.0.1:${port}/dashboard`)
    assert.match(String(line.msg), new RegExp(`http://127\\.0\\.0\\.1:${port}/docs`))
  })
})

test('at LOG_LEVEL=debug the probes are logged', async () => {
  const t = await startApp(httpBackends[0]!, { LOG_LEVEL: 'debug' })
  try {
    await t.request({ method: 'GET', url: '/health', headers: { 'x-request-id': 'probe-debug' } })
    const mine = t.logs
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.reqId === 'probe-debug')
    assert.deepEqual(
      mine.map((l) => l.msg),
      ['incoming request', 'request completed'],
    )
  } finally {
    await t.close()
  }
})
