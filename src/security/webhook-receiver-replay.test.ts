// The partner client's webhook receiver refuses replays, whatever the spelling of the
// timestamp and whichever receiver (restarted, or a second one) the replay reaches, given a shared store.
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, test } from 'node:test'
import { Redis } from 'ioredis'
import { Webhook } from 'standardwebhooks'
import {
  memoryReplayStore,
  type ReplayStore,
  WebhookReceiver,
} from '../../packages/partner-client/src/webhooks.js'

const SECRET = `whsec_${Buffer.alloc(32, 5).toString('base64')}`
const body = JSON.stringify({ company_ticket_id: 'order-9', status: 'USED', user_email: 'h@example.com' })

/** A delivery as the service signs it, captured by an attacker on the way. */
function captured(id = `msg_${Math.random().toString(36).slice(2)}`) {
  const at = new Date()
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(SECRET).sign(id, at, body),
  }
}

/** A partner's endpoint built with the helper, on a real socket; counts the notifications handled. */
async function endpoint(store?: ReplayStore) {
  const handled: string[] = []
  const receiver = new WebhookReceiver({ secret: SECRET, ...(store ? { replayStore: store } : {}) })
  const server = http.createServer(receiver.nodeListener(({ id }) => void handled.push(id)))
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`
  return {
    handled,
    send: async (headers: Record<string, string>) =>
      (
        await fetch(url, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body,
        })
      ).status,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}

test('a replay with a re-spelled timestamp is refused', async () => {
  const e = await endpoint()
  try {
    const h = captured()
    assert.equal(await e.send(h), 204)
    const ts = h['webhook-timestamp']
    for (const spelling of [`0${ts}`, `+${ts}`, `${ts}x`, ` ${ts}`, `${ts}.0`, `00${ts}`, `${ts}e0`])
      assert.equal(
        await e.send({ ...h, 'webhook-timestamp': spelling }),
        400,
        `timestamp ${JSON.stringify(spelling)}`,
      )
    assert.equal(await e.send(h), 400, 'the same request again')
    assert.deepEqual(e.handled, [h['webhook-id']])
    // A resend by the service (same webhook-id, signed anew at another second) is still accepted.
    const later = new Date(Date.now() + 1000)
    const resent = {
      'webhook-id': h['webhook-id'],
      'webhook-timestamp': String(Math.floor(later.getTime() / 1000)),
      'webhook-signature': new Webhook(SECRET).sign(h['webhook-id'], later, body),
    }
    assert.equal(await e.send(resent), 204)
  } finally {
    await e.close()
  }
})

/** The documented Redis replay store: SET NX with the entry's lifetime, atomic across receivers. */
function redisReplayStore(redis: Redis, prefix: string): ReplayStore {
  return {
    remember: async (key, ttlMs) => (await redis.set(`${prefix}${key}`, '1', 'PX', ttlMs, 'NX')) === 'OK',
  }
}

const redisUrl = process.env.TEST_REDIS_URL
const clients: Redis[] = []
after(() => {
  for (const c of clients) c.disconnect()
})

for (const kind of ['shared memory', 'Redis'] as const)
  test(`a receiver restarted with a shared store refuses a replay (${kind})`, {
    skip: kind === 'Redis' && !redisUrl ? 'TEST_REDIS_URL is not set: Redis case SKIPPED' : false,
  }, async () => {
    const prefix = `wbtest:replay:${Math.random().toString(36).slice(2)}:`
    const storeOf = () => {
      if (kind === 'shared memory') return shared
      const c = new Redis(redisUrl!)
      clients.push(c)
      return redisReplayStore(c, prefix)
    }
    const shared = memoryReplayStore()
    const h = captured()
    const first = await endpoint(storeOf())
    assert.equal(await first.send(h), 204)
    await first.close()
    // Restarted (a new process would build a new receiver with the same shared store).
    const restarted = await endpoint(storeOf())
    try {
      assert.equal(await restarted.send(h), 400)
      assert.deepEqual(restarted.handled, [])
    } finally {
      await restarted.close()
    }
    // Without a shared store the restarted receiver would have accepted it: the store is what refuses.
    const forgetful = await endpoint()
    try {
      assert.equal(await forgetful.send(h), 204)
    } finally {
      await forgetful.close()
    }
  })
