import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { createHttpClient, ForbiddenDestinationError, isPublicAddress } from './http-client.js'

let server: http.Server
let port: number
const hits: string[] = []
before(async () => {
  server = http.createServer((req, res) => {
    hits.push(req.url ?? '')
    if (req.url === '/redirect') {
      res.writeHead(301, { location: '/target' })
      return res.end()
    }
    // Never answers (the connection is closed after the tests): a timeout is the only way out.
    if (req.url === '/slow') return
    res.end('x'.repeat(5000))
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  port = (server.address() as AddressInfo).port
})
after(() => {
  server.closeAllConnections()
  server.close()
})

test('only globally routable unicast addresses count as public', () => {
  for (const a of ['93.184.215.14', '8.8.8.8', '2606:4700:4700::1111'])
    assert.equal(isPublicAddress(a), true, a)
  for (const a of [
    '127.0.0.1',
    '10.0.0.1',
    '172.16.5.4',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '255.255.255.255',
    '224.0.0.1',
    '::1',
    '::',
    'fe80::1',
    'fc00::1',
    'fd12:3456::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    'not-an-address',
  ])
    assert.equal(isPublicAddress(a), false, a)
})

test('refuses loopback by IP literal and by name (after DNS resolution) unless allowed', async () => {
  const guarded = createHttpClient({ allowPrivate: false, timeoutMs: 1000 })
  try {
    await assert.rejects(
      guarded.post(`http://127.0.0.1:${port}/`, { headers: {}, body: '{}' }),
      ForbiddenDestinationError,
    )
    await assert.rejects(
      guarded.post(`http://[::1]:${port}/`, { headers: {}, body: '{}' }),
      ForbiddenDestinationError,
    )
    await assert.rejects(
      guarded.post(`http://localhost:${port}/`, { headers: {}, body: '{}' }),
      (err: Error & { cause?: Error }) =>
        err instanceof ForbiddenDestinationError || err.cause instanceof ForbiddenDestinationError,
    )
    await assert.rejects(guarded.checkDestination(`http://localhost:${port}/`), ForbiddenDestinationError)
    assert.equal(hits.length, 0, 'a refused request reached the server')
  } finally {
    await guarded.close()
  }
})

test('allowed: posts, truncates the answer, follows no redirect, times out', async () => {
  // A timeout that a loaded machine cannot reach on the answered requests; the unanswered one meets it.
  const client = createHttpClient({ allowPrivate: true, timeoutMs: 2000, maxBodyBytes: 100 })
  try {
    const ok = await client.post(`http://localhost:${port}/`, { headers: {}, body: '{}' })
    assert.equal(ok.status, 200)
    assert.equal(ok.body.length, 100)
    const redirect = await client.post(`http://127.0.0.1:${port}/redirect`, { headers: {}, body: '{}' })
    assert.equal(redirect.status, 301)
    assert.ok(!hits.includes('/target'))
    await assert.rejects(client.post(`http://127.0.0.1:${port}/slow`, { headers: {}, body: '{}' }))
  } finally {
    await client.close()
  }
})
