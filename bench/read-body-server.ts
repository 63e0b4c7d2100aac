import { randomUUID } from 'node:crypto'
import http from 'node:http'

/**
 * The floor of any verify lane on node:http: what the verify lane does minus verify itself. It reads
 * the request body, parses it, and answers the fixed verify answer with the service's own header set
 * (security headers, a fresh request id, rate-limit headers), head and body in one write. The gap
 * between this server and the bare baseline is node:http's cost of taking a body and writing those
 * headers; the gap between it and the service is the service's own work (limit, check, metrics).
 */
const body = process.env.BASELINE_BODY ?? '{"valid":true,"claims":{}}'
const given = JSON.parse(process.env.BASELINE_HEADERS ?? '{}') as Record<string, string>
const fixed: string[] = []
for (const [name, value] of Object.entries(given))
  if (!['date', 'connection', 'keep-alive', 'content-length', 'x-request-id'].includes(name))
    fixed.push(name, value)
const length = String(Buffer.byteLength(body))

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (chunk: Buffer) => chunks.push(chunk))
  req.on('end', () => {
    // The readiness probe (GET /) has no body.
    if (chunks.length > 0) JSON.parse(Buffer.concat(chunks).toString('utf8'))
    res.writeHead(200, [...fixed, 'content-length', length, 'x-request-id', randomUUID()])
    res.end(body)
  })
})
server.keepAliveTimeout = 72_000
server.listen(Number(process.env.PORT), '127.0.0.1')
process.on('SIGTERM', () => server.close(() => process.exit(0)))
