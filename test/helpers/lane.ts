import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before } from 'node:test'
import { startApp, type TestApp, type TestDependencies } from './app.js'
import type { Backend, ProvisionedBackend } from './backends.js'

/**
 * Test support for the verify lane (src/tokens/verify-lane.ts and check-lane.ts), which exists only on
 * a listening server: requests over a real socket, and two instances on one storage with the lane on
 * and off, whose answers must be the same.
 */

export interface Answer {
  status: number
  headers: http.IncomingHttpHeaders
  rawHeaders: string[]
  body: string
}

export interface Sent {
  name: string
  method?: string
  /** POST /tokens/verify unless said otherwise. */
  path?: string
  headers?: Record<string, string>
  /** Sent with a JSON content type and its length (which `headers` may override); none: no body. */
  body?: string | Buffer
}

/** One request over a real socket: the lane sits on the server, in front of Fastify, not in inject(). */
export function send(port: number, req: Sent): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const body = req.body
    const r = http.request(
      {
        host: '127.0.0.1',
        port,
        method: req.method ?? 'POST',
        path: req.path ?? '/tokens/verify',
        headers: {
          ...(body === undefined
            ? {}
            : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }),
          ...req.headers,
        },
      },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (d) => {
          text += d
        })
        res.on('end', () =>
          resolve({ status: res.statusCode!, headers: res.headers, rawHeaders: res.rawHeaders, body: text }),
        )
      },
    )
    r.on('error', reject)
    r.end(body ?? '')
  })
}

/** What must be identical with the lane on and off: all but Date and a generated request id. */
export function comparable(a: Answer, req: Sent) {
  const { date: _date, 'x-request-id': id, ...headers } = a.headers
  // Seconds left of a window, read a moment apart on two instances whose windows began a moment
  // apart: they may differ by one across a second's boundary. Their presence and range must agree.
  for (const name of ['x-ratelimit-reset', 'retry-after']) {
    const v = Number(headers[name])
    if (headers[name] !== undefined) headers[name] = v >= 1 && v <= 60 ? 'n' : `out of range: ${v}`
  }
  const given = req.headers?.['x-request-id']
  let body = a.body
  // An API key's answer carries iat/exp of the moment of the check; the two instances' clocks may
  // straddle a second.
  body = body
    .replace(/"iat":\d+,"exp":\d+/, '"iat":T,"exp":T+60')
    .replace(/"retry_after":\d+/, '"retry_after":n')
  const kept = given !== undefined && /^[A-Za-z0-9._-]{1,64}$/.test(given)
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
  return { status: a.status, headers, body, id: kept ? id : uuid.test(String(id)) ? 'generated' : id }
}

export interface LanePair {
  on: TestApp
  off: TestApp
  portOn: number
  portOff: number
}

/**
 * Two listening instances on one storage for the suite, the lane on and off, each with its own Redis
 * prefix so that they count their rate limits apart, as two services would.
 */
export function lanePair(
  backend: Backend,
  deps: TestDependencies = {},
  env: Record<string, string> = {},
): () => LanePair {
  let p: ProvisionedBackend | undefined
  let pair: Partial<LanePair> = {}
  before(async () => {
    p = await backend.provision()
    const prefix = p.env.REDIS_PREFIX ?? 'wb:'
    const start = async (lane: 'true' | 'false') => {
      const t = await startApp(
        backend,
        { ...env, VERIFY_FAST_LANE: lane, REDIS_PREFIX: `${prefix}${lane}:` },
        p,
        deps,
      )
      await t.app.listen({ host: '127.0.0.1', port: 0 })
      return t
    }
    const on = await start('true')
    pair = { on }
    const off = await start('false')
    pair = { on, off, portOn: portOf(on), portOff: portOf(off) }
  })
  after(async () => {
    await pair.on?.close()
    await pair.off?.close()
    await p?.dispose()
  })
  return () => pair as LanePair
}

/** The port a listening test instance took. */
export function portOf(t: TestApp): number {
  return (t.app.server.address() as AddressInfo).port
}
