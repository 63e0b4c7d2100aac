// SMTP as a platform team meets it: a relay that never greets, one that goes silent in the middle of
// a send, and a slow one with two instances polling the same job queue.
import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { withTwoInstances } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import { SmtpSink } from '../../test/helpers/smtp-sink.js'
import { until, waitFor } from '../../test/helpers/until.js'
import { queueMail, smtpTransport } from './mail.js'

/** A TCP server that accepts connections and answers what `greet` says (nothing when absent). */
async function silentServer(greet?: string): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => undefined)
    if (greet) socket.write(greet)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `smtp://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: () => {
      for (const s of sockets) s.destroy()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
}

const message = { to: 'holder@example.com', subject: 'Your tickets', text: 'hello' }

// nodemailer's own timeouts are 30 s for the greeting and 10 minutes of silence: a test whose send
// fails within its 20 s bound failed on the configured one (the error's kind says which).
describe('SMTP timeouts reach the transport', { timeout: 20_000 }, () => {
  test('a server that accepts and never greets: the send fails with the greeting timeout', async () => {
    const server = await silentServer()
    try {
      await assert.rejects(smtpTransport(server.url, 'wristband <no-reply@example.com>', 1).send(message), {
        code: 'ETIMEDOUT',
        timeoutType: 'GREETING_TIMEOUT',
      })
    } finally {
      await server.close()
    }
  })

  test('a server that greets and then says nothing: the send fails with the socket timeout', async () => {
    const server = await silentServer('220 relay.example.com ESMTP\r\n')
    try {
      await assert.rejects(smtpTransport(server.url, 'wristband <no-reply@example.com>', 1).send(message), {
        code: 'ETIMEDOUT',
        timeoutType: 'SOCKET_TIMEOUT',
      })
    } finally {
      await server.close()
    }
  })
})

describe('SMTP connections', () => {
  const sink = new SmtpSink()
  before(() => sink.start())
  after(() => sink.stop())

  test('messages one after another share one connection to the relay, which close ends', async () => {
    const smtp = smtpTransport(sink.url, 'wristband <no-reply@example.com>', 10)
    for (const to of ['a@example.com', 'b@example.com', 'c@example.com']) await smtp.send({ ...message, to })
    assert.deepEqual(
      sink.messages.map((m) => m.subject),
      ['Your tickets', 'Your tickets', 'Your tickets'],
    )
    assert.equal(sink.connections.opened, 1)
    smtp.close()
    await until('the relay saw the connection close', () => sink.connections.closed === 1)
  })
})

eachBackend(httpBackends, 'a mail job that outlives its lease', (backend) => {
  const sink = new SmtpSink()
  before(() => sink.start())
  after(() => sink.stop())

  test('a slow mail server and two instances: the job keeps its lease while it runs, one mail', async () => {
    const LEASE_SECONDS = 2
    await withTwoInstances(
      backend,
      {
        SMTP_URL: sink.url,
        SMTP_TIMEOUT_SECONDS: '60',
        JOBS_POLL_MS: '20',
        JOBS_LEASE_SECONDS: String(LEASE_SECONDS),
      },
      async (a) => {
        const release = sink.hold()
        try {
          const to = `slow-${backend.name.replace(/\W/g, '')}@example.com`
          await queueMail(a.db.db, a.clock.now(), { ...message, to })
          await until('the relay has the message and holds its answer', () => sink.arriving === 1)
          const job = () =>
            a.db.db
              .selectFrom('jobs')
              .select(['locked_until', 'attempts', 'done_at'])
              .where('kind', '=', 'mail')
              .where('payload', 'like', `%${to}%`)
              .executeTakeFirstOrThrow()
          const claimed = await job()
          const firstLeaseEnd = claimed.locked_until!
          // Both instances poll every 20 ms. Without renewal the lease runs out and the other instance
          // sends the message again (a second arrival); with it, the lease is still held a whole lease
          // after the first one would have ended. (The bound of the wait stops a hang: a runner with a
          // fixed lease of a minute sends twice after about 60 s.)
          const outcome = await waitFor(async () => {
            if (sink.arriving > 1) return 'sent twice'
            const now = a.clock.now()
            const row = await job()
            return now > firstLeaseEnd + LEASE_SECONDS * 1000 && row.locked_until! > now ? 'held' : undefined
          }, 120_000)
          assert.equal(outcome, 'held')
          release()
          await until('the job is done', async () => (await job()).done_at !== null)
          assert.equal(sink.to(to).length, 1)
          assert.equal(sink.arriving, 1)
          assert.equal((await job()).attempts, 1, 'claimed once')
        } finally {
          release()
        }
      },
    )
  })
})
