// A webhook receiver in Node with no dependencies (docs/partner-api.md): verifies wristband's Standard
// Webhooks signature, refuses stale times and replays, prints each notification as a JSON line.
// WEBHOOK_SECRET=whsec_... PORT=9000 node receiver.mjs
import { createHmac, timingSafeEqual } from 'node:crypto'
import http from 'node:http'

const key = Buffer.from(process.env.WEBHOOK_SECRET.replace(/^whsec_/, ''), 'base64')
const seen = new Map() // "id timestamp" -> when it may be forgotten (use a shared store with several receivers)

function verify(headers, body) {
  const id = headers['webhook-id'] ?? ''
  const ts = headers['webhook-timestamp'] ?? ''
  if (!/^\d{1,12}$/.test(ts)) return 'bad timestamp'
  if (Math.abs(Date.now() / 1000 - Number(ts)) > 300) return 'stale'
  const expected = createHmac('sha256', key).update(`${id}.${ts}.`).update(body).digest()
  const ok = (headers['webhook-signature'] ?? '').split(' ').some((s) => {
    const given = Buffer.from(s.startsWith('v1,') ? s.slice(3) : '', 'base64')
    return given.length === expected.length && timingSafeEqual(given, expected)
  })
  if (!ok) return 'bad signature'
  for (const [k, until] of seen) if (until < Date.now()) seen.delete(k)
  if (seen.has(`${id} ${ts}`)) return 'replay'
  seen.set(`${id} ${ts}`, Date.now() + 600_000)
  return null
}

http
  .createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      const refused = verify(req.headers, body)
      if (refused) return res.writeHead(400).end(refused)
      // Handle it (deduplicate by webhook-id: a resend carries the same one), then acknowledge.
      console.log(JSON.stringify({ id: req.headers['webhook-id'], ...JSON.parse(body) }))
      res.writeHead(204).end()
    })
  })
  .listen(Number(process.env.PORT ?? 9000), '127.0.0.1', () => console.error('listening'))
