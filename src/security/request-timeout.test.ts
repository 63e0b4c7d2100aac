import assert from 'node:assert/strict'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import net from 'node:net'
import { after, before, test } from 'node:test'
import { startApp, type TestApp } from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'

/**
 * Without a request timeout, a client that sent a request's headers and then its body a
 * byte at a time held the connection (and, on the verify lane, a pending body) for as long as it
 * liked; Fastify's default is no timeout, and the lane's server copied it. REQUEST_TIMEOUT_SECONDS
 * (30 by default; 1 here) now cuts such a request with 408 and closes the connection, on the verify
 * lane and on Fastify's routes, with the lane on and off.
 */

interface Trickle {
  /** What the server sent before it closed the connection. */
  answer: string
  /** Body bytes the client had sent when the connection closed (it never finished). */
  sent: number
}

/**
 * Sends a request's headers, then its body a byte every 100 ms, announcing 1000 bytes more than it
 * has: the body never completes. Once it has sent all it has, the client gives up (half-closes).
 */
async function trickle(port: number, path: string, body: string): Promise<Trickle> {
  const socket = net.connect(port, '127.0.0.1')
  await once(socket, 'connect')
  // Closed by the server, normally or (a byte of ours in flight as it closed) with a reset.
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()))
  socket.on('error', () => {})
  let answer = ''
  let sent = 0
  const timer = setInterval(() => {
    if (!socket.writable) return
    if (sent < body.length) socket.write(body[sent++]!)
    else socket.end()
  }, 100)
  socket.setEncoding('utf8')
  socket.on('data', (d) => {
    // The server answered: the client stops sending, as a client reading its answer would.
    clearInterval(timer)
    answer += d
  })
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length + 1000}\r\n\r\n`,
  )
  try {
    await closed
  } finally {
    clearInterval(timer)
  }
  return { answer, sent }
}

eachBackend(httpBackends, 'request timeouts', (backend) => {
  let p: ProvisionedBackend
  const apps: TestApp[] = []
  const ports: Record<string, number> = {}
  before(async () => {
    p = await backend.provision()
    const prefix = p.env.REDIS_PREFIX ?? 'wb:'
    for (const lane of ['true', 'false']) {
      const t = await startApp(
        backend,
        { REQUEST_TIMEOUT_SECONDS: '1', VERIFY_FAST_LANE: lane, REDIS_PREFIX: `${prefix}${lane}:` },
        p,
      )
      apps.push(t)
      await t.app.listen({ host: '127.0.0.1', port: 0 })
      ports[lane] = (t.app.server.address() as AddressInfo).port
    }
  })
  after(async () => {
    for (const t of apps) await t.close()
    await p?.dispose()
  })

  test('a trickled body is cut after the timeout', async () => {
    // Long enough that the client is still sending when a second has passed (a byte every 100 ms).
    const body = JSON.stringify({ token: 'x'.repeat(150) })
    const login = JSON.stringify({ email: `${'x'.repeat(150)}@example.com`, password: 'wrong-password-1' })
    for (const [lane, port] of Object.entries(ports))
      for (const [path, text] of [
        ['/tokens/verify', body],
        ['/auth/login', login],
      ] as const) {
        const what = `${path} with VERIFY_FAST_LANE=${lane}`
        const cut = await trickle(port, path, text)
        assert.ok(cut.sent < text.length, `${what}: the server closed before the body was complete`)
        assert.match(cut.answer, /^HTTP\/1\.1 408 Request Timeout\r\n/, what)
        assert.match(cut.answer, /\r\n\r\n\{"detail":"Request not received in time"\}$/, what)
      }
  })

  test('a request sent at once is not affected', async () => {
    const res = await fetch(`http://127.0.0.1:${ports.true}/tokens/verify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: 'x' }),
    })
    assert.equal(res.status, 200)
    assert.deepEqual(await res.json(), { valid: false, claims: null })
  })
})
