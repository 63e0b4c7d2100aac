import assert from 'node:assert/strict'
import fs from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { webhookSmsSender } from './sms.js'

interface Received {
  headers: IncomingMessage['headers']
  body: unknown
}

/** A real HTTP receiver whose answers the test scripts, one handler per request in order. */
async function receiver() {
  const received: Received[] = []
  const script: ((res: ServerResponse) => void)[] = []
  const server: Server = createServer((req, res) => {
    let raw = ''
    req.on('data', (c) => {
      raw += c
    })
    req.on('end', () => {
      received.push({ headers: req.headers, body: raw ? JSON.parse(raw) : null })
      const answer = script.shift() ?? ((r: ServerResponse) => r.writeHead(200).end('{}'))
      answer(res)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/sms`
  return {
    url,
    received,
    script,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

const status = (code: number) => (res: ServerResponse) => res.writeHead(code).end()
/** Never answers: the sender's timeout has to give up on this attempt. */
const hang = () => {}

const r = await receiver()
after(() => r.close())

describe('webhook SMS provider', () => {
  test('POSTs {to, text} as JSON with the configured Authorization', async () => {
    const sender = webhookSmsSender({ url: r.url, authorization: 'Bearer abc', timeoutMs: 2000, retries: 0 })
    await sender.send({ to: '+4915100000001', text: '123456 is your wristband code' })
    await sender.close()
    const last = r.received.at(-1)!
    assert.deepEqual(last.body, { to: '+4915100000001', text: '123456 is your wristband code' })
    assert.equal(last.headers['content-type'], 'application/json')
    assert.equal(last.headers.authorization, 'Bearer abc')
  })

  test('retries 5xx and 429 answers, then succeeds', async () => {
    const before = r.received.length
    r.script.push(status(503), status(429))
    const sender = webhookSmsSender({ url: r.url, timeoutMs: 2000, retries: 2, retryDelayMs: 10 })
    await sender.send({ to: '+4915100000001', text: 'x' })
    await sender.close()
    assert.equal(r.received.length - before, 3)
  })

  test('gives up after the configured retries', async () => {
    const before = r.received.length
    r.script.push(status(500), status(500), status(500))
    const sender = webhookSmsSender({ url: r.url, timeoutMs: 2000, retries: 2, retryDelayMs: 10 })
    await assert.rejects(sender.send({ to: '+4915100000001', text: 'x' }))
    await sender.close()
    assert.equal(r.received.length - before, 3)
  })

  test('a 4xx other than 429 is not retried', async () => {
    const before = r.received.length
    r.script.push(status(400))
    const sender = webhookSmsSender({ url: r.url, timeoutMs: 2000, retries: 3, retryDelayMs: 10 })
    await assert.rejects(sender.send({ to: '+4915100000001', text: 'x' }), /400/)
    await sender.close()
    assert.equal(r.received.length - before, 1)
  })

  test('an attempt that gets no answer times out and is retried', async () => {
    const before = r.received.length
    r.script.push(hang)
    const sender = webhookSmsSender({ url: r.url, timeoutMs: 300, retries: 1, retryDelayMs: 10 })
    await sender.send({ to: '+4915100000001', text: 'x' })
    await sender.close()
    assert.equal(r.received.length - before, 2)
  })

  test('an unreachable provider rejects', async () => {
    const sender = webhookSmsSender({
      url: 'http://127.0.0.1:9/sms',
      timeoutMs: 500,
      retries: 1,
      retryDelayMs: 10,
    })
    await assert.rejects(sender.send({ to: '+4915100000001', text: 'x' }))
    await sender.close()
  })
})

forEachBackend(httpBackends, 'SMS through the outbox folder (default)', (ctx) => {
  let t: TestApp
  before(() => {
    t = ctx()
  })

  test('each message is one JSON file in DATA_DIR/outbox/sms with nothing but the code and the product name', async () => {
    const phone = '+4915100000077'
    assert.equal(
      (await t.request({ method: 'POST', url: '/verify/messaging/start', payload: { phone } })).statusCode,
      200,
    )
    assert.equal(
      (await t.request({ method: 'POST', url: '/verify/messaging/start', payload: { phone } })).statusCode,
      200,
    )
    const dir = path.join(t.config.DATA_DIR, 'outbox', 'sms')
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'))
    assert.equal(files.length, 2)
    const messages = files.map((f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')))
    for (const m of messages) {
      assert.equal(m.to, phone)
      assert.match(m.text, /^\d{6} is your wristband code$/)
    }
    // The latest file holds the live code.
    const code = /\d{6}/.exec(messages.at(-1).text)![0]
    const res = await t.request({ method: 'POST', url: '/verify/messaging/check', payload: { phone, code } })
    assert.equal(res.statusCode, 200)
  })
})

forEachBackend(
  httpBackends,
  'SMS through SMS_WEBHOOK_URL',
  (ctx) => {
    test('the code goes to the provider; a failing provider is 503', async () => {
      const t = ctx()
      const phone = '+4915100000078'
      const ok = await t.request({ method: 'POST', url: '/verify/messaging/start', payload: { phone } })
      assert.equal(ok.statusCode, 200)
      const sent = r.received.at(-1)!
      assert.equal(sent.headers.authorization, 'Token provider-key')
      const { to, text } = sent.body as { to: string; text: string }
      assert.equal(to, phone)
      const code = /\d{6}/.exec(text)![0]
      const checked = await t.request({
        method: 'POST',
        url: '/verify/messaging/check',
        payload: { phone, code },
      })
      assert.equal(checked.statusCode, 200)
      r.script.push(status(502))
      const failed = await t.request({ method: 'POST', url: '/verify/messaging/start', payload: { phone } })
      assert.equal(failed.statusCode, 503)
    })
  },
  { SMS_WEBHOOK_URL: r.url, SMS_WEBHOOK_RETRIES: '0', SMS_WEBHOOK_AUTHORIZATION: 'Token provider-key' },
)
