import http from 'node:http'

/**
 * The yardstick: the least a Node HTTP server can do for a verify call. It answers every request with
 * a fixed body of the same shape and size as a real `POST /tokens/verify` answer, and never reads the
 * request (node:http discards the body itself before the next request on the connection).
 */
const body = Buffer.from(process.env.BASELINE_BODY ?? '{"valid":true,"claims":{}}')
const headers = { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length }

const server = http.createServer((_req, res) => {
  res.writeHead(200, headers)
  res.end(body)
})
server.keepAliveTimeout = 72_000
server.listen(Number(process.env.PORT), '127.0.0.1')
process.on('SIGTERM', () => server.close(() => process.exit(0)))
