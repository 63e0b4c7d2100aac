import { once } from 'node:events'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'
import Fastify from 'fastify'
import type { TestApp } from '../../../test/helpers/app.js'
import { createExpressGuard } from './express.js'
import { createFastifyGuard } from './fastify.js'
import type { GuardOptions } from './guard.js'
import type { Verifier } from './verifier.js'

export interface ServedService {
  baseUrl: string
  /** POST /tokens/verify requests that reached the service so far. */
  verifyCalls(): number
}

/** Puts a test instance of wristband on a loopback port and counts the verify requests it receives. */
export async function serve(t: TestApp): Promise<ServedService> {
  let calls = 0
  t.app.server.on('request', (req: http.IncomingMessage) => {
    if (req.method === 'POST' && req.url === '/tokens/verify') calls++
  })
  await t.app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = t.app.server.address() as AddressInfo
  return { baseUrl: `http://127.0.0.1:${port}`, verifyCalls: () => calls }
}

export interface Backend {
  name: 'fastify' | 'express'
  url: string
  close(): Promise<void>
}

/**
 * The same small ticketing backend in both frameworks:
 * GET /me (any valid token), GET /events/:eventId/scan (ticket:scan there), GET /events/:eventId/refund
 * (pos:refund there), GET /reports (reports:read for every event); the Fastify one also has
 * POST /events/:eventId/scans (ticket:scan there, checked before the body is validated).
 */
export async function startBackends(verifier: Verifier, options: GuardOptions = {}): Promise<Backend[]> {
  return [await fastifyBackend(verifier, options), await expressBackend(verifier, options)]
}

async function fastifyBackend(verifier: Verifier, options: GuardOptions): Promise<Backend> {
  const app = Fastify()
  const guard = createFastifyGuard(verifier, options)
  const byEvent = { event: (req: { params: Record<string, string> }) => req.params.eventId }
  app.get('/me', { preHandler: guard.authenticate }, async (req) => ({ sub: guard.claimsOf(req).sub }))
  app.get(
    '/events/:eventId/scan',
    { preHandler: guard.requireScopes('ticket:scan', byEvent) },
    async (req) => ({
      scanned_by: guard.claimsOf(req).sub,
    }),
  )
  app.get(
    '/events/:eventId/refund',
    { preHandler: guard.requireScopes('pos:refund', byEvent) },
    async () => ({
      refunded: true,
    }),
  )
  app.get('/reports', { preHandler: guard.requireScopes('reports:read') }, async () => ({ reports: [] }))
  // As an onRequest hook the guard answers before the body is read or validated.
  app.post(
    '/events/:eventId/scans',
    {
      onRequest: guard.requireScopes('ticket:scan', byEvent),
      schema: {
        body: {
          type: 'object',
          required: ['ticket'],
          properties: { ticket: { type: 'string' } },
          additionalProperties: false,
        },
      },
    },
    async (req) => ({ scanned_by: guard.claimsOf(req).sub }),
  )
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as AddressInfo
  return { name: 'fastify', url: `http://127.0.0.1:${port}`, close: () => app.close() }
}

async function expressBackend(verifier: Verifier, options: GuardOptions): Promise<Backend> {
  const app = express()
  const guard = createExpressGuard(verifier, options)
  const byEvent = { event: (req: express.Request) => req.params.eventId }
  app.get('/me', guard.authenticate, (req, res) => {
    res.json({ sub: guard.claimsOf(req).sub })
  })
  app.get('/events/:eventId/scan', guard.requireScopes('ticket:scan', byEvent), (req, res) => {
    res.json({ scanned_by: guard.claimsOf(req).sub })
  })
  app.get('/events/:eventId/refund', guard.requireScopes('pos:refund', byEvent), (_req, res) => {
    res.json({ refunded: true })
  })
  app.get('/reports', guard.requireScopes('reports:read'), (_req, res) => {
    res.json({ reports: [] })
  })
  const server = http.createServer(app).listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  return {
    name: 'express',
    url: `http://127.0.0.1:${port}`,
    async close() {
      server.closeAllConnections()
      server.close()
      await once(server, 'close')
    },
  }
}

/** GET on a backend with an optional bearer token. */
export function get(backend: Backend, path: string, token?: string): Promise<Response> {
  return fetch(`${backend.url}${path}`, token ? { headers: { authorization: `Bearer ${token}` } } : {})
}
