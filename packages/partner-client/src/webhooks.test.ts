// The receiver helper on signed requests made with the official library, at chosen times.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Webhook } from 'standardwebhooks'
import { WebhookReceiver, WebhookReplayError, WebhookVerificationError } from './webhooks.js'

const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`
const body = JSON.stringify({ company_ticket_id: 'order-1', status: 'USED' })

function signed(id: string, at: Date) {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(SECRET).sign(id, at, body),
  }
}

test('a signed request within the tolerance is accepted once; the same request again is a replay', () => {
  const receiver = new WebhookReceiver({ secret: SECRET })
  const headers = signed('msg_1', new Date())
  const ok = receiver.verify(body, headers)
  assert.equal(ok.id, 'msg_1')
  assert.deepEqual(ok.payload, { company_ticket_id: 'order-1', status: 'USED' })
  assert.throws(() => receiver.verify(body, headers), WebhookReplayError)
  // A resend: same webhook-id, signed again at another time.
  const resent = signed('msg_1', new Date(Date.now() + 2000))
  assert.equal(receiver.verify(body, resent).id, 'msg_1')
})

test('a signed time outside the tolerance is refused, however good the signature', () => {
  const receiver = new WebhookReceiver({ secret: SECRET, toleranceSeconds: 60 })
  assert.throws(
    () => receiver.verify(body, signed('msg_2', new Date(Date.now() - 120_000))),
    /outside the tolerance/,
  )
  // Past the library's own five minutes too.
  const lax = new WebhookReceiver({ secret: SECRET, toleranceSeconds: 3600 })
  assert.throws(
    () => lax.verify(body, signed('msg_3', new Date(Date.now() - 600_000))),
    WebhookVerificationError,
  )
})

test('another secret, a changed body or missing headers are refused', () => {
  const receiver = new WebhookReceiver({ secret: SECRET })
  const other = new WebhookReceiver({ secret: `whsec_${Buffer.alloc(32, 9).toString('base64')}` })
  assert.throws(() => other.verify(body, signed('msg_4', new Date())), WebhookVerificationError)
  assert.throws(() => receiver.verify(`${body} `, signed('msg_5', new Date())), WebhookVerificationError)
  assert.throws(() => receiver.verify(body, {}), WebhookVerificationError)
})

test('the replay memory is bounded: the oldest entries go first', () => {
  const receiver = new WebhookReceiver({ secret: SECRET, remember: 2 })
  const first = signed('msg_a', new Date())
  receiver.verify(body, first)
  receiver.verify(body, signed('msg_b', new Date()))
  receiver.verify(body, signed('msg_c', new Date()))
  const last = signed('msg_d', new Date())
  receiver.verify(body, last)
  // The most recent is still recognised; msg_a was forgotten (the bound of two), so it passes again.
  assert.throws(() => receiver.verify(body, last), WebhookReplayError)
  assert.doesNotThrow(() => receiver.verify(body, first))
})
