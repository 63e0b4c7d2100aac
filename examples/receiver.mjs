// The partner's webhook receiver of examples/walkthrough.mjs: a plain HTTP server on 127.0.0.1.
import http from 'node:http'

/**
 * A receiver for the partner's webhook. `next()` resolves with the next notification not yet taken,
 * with its headers and body, whether it arrived before the call (the service is quick) or after.
 */
export async function startReceiver() {
  const received = []
  const waiting = []
  let taken = 0
  const next = () =>
    taken < received.length
      ? Promise.resolve(received[taken++])
      : new Promise((resolve) => waiting.push(resolve))
  const server = http.createServer((req, res) => {
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      res.end('ok')
      received.push({ headers: req.headers, body })
      if (waiting.length > 0) waiting.shift()(received[taken++])
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${server.address().port}/wristband`,
    next,
    /** How many notifications arrived so far. */
    count: () => received.length,
    close: () => server.close(),
  }
}
