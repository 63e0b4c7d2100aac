import assert from 'node:assert/strict'
import { once } from 'node:events'
import net, { type AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { type ParsedMail, simpleParser } from 'mailparser'
import { SMTPServer } from 'smtp-server'
import { startApp, type TestApp } from '../../test/helpers/app.js'
import { type Backend, eachBackend, httpBackends } from '../../test/helpers/backends.js'
import {
  claimTokenOf,
  newTicketType,
  type PartnerKeys,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'
import { waitFor } from '../../test/helpers/until.js'

interface Received {
  raw: string
  mail: ParsedMail
}

/** A real SMTP server on loopback standing in for the mail relay. */
const received: Received[] = []
const smtp = new SMTPServer({
  authOptional: true,
  disabledCommands: ['STARTTLS', 'AUTH'],
  logger: false,
  onData(stream, _session, callback) {
    const chunks: Buffer[] = []
    stream.on('data', (c: Buffer) => chunks.push(c))
    stream.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8')
      simpleParser(raw).then(
        (mail) => {
          received.push({ raw, mail })
          callback()
        },
        (err: Error) => callback(err),
      )
    })
  },
})
await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve))
after(() => new Promise<void>((resolve) => smtp.close(() => resolve())))

const env = {
  SMTP_URL: `smtp://127.0.0.1:${(smtp.server.address() as AddressInfo).port}`,
  TRANSFER_EMAIL_DELAY_SECONDS: '60',
  JOBS_POLL_MS: '20',
  PUBLIC_BASE_URL: 'https://wristband.example',
}
const EVENT = 'summer-fest-2026'
const mailTo = (address: string) =>
  received.filter((r) => r.mail.to && JSON.stringify(r.mail.to).includes(address))

/** The SMTP sink is shared by every suite of this file: addresses carry the backend's name. */
const tagOf = (backend: Backend) => backend.name.replace(/\W/g, '')

eachBackend(httpBackends, 'grouped transfer e-mail', (backend) => {
  const tag = tagOf(backend)
  const group = `group-${tag}@example.com`
  let t: TestApp
  let keys: PartnerKeys
  let ticketUid: string
  before(async () => {
    t = await startApp(backend, env)
    keys = await seedPartner(t)
    ticketUid = await newTicketType(t, keys.write)
  })
  after(() => t.close())

  const transfer = (email: string, company_ticket_id: string, extra: Record<string, unknown> = {}) =>
    partnerPost(t, '/companies/transfer', keys.write, {
      event_uid: EVENT,
      email,
      ticket_uid: ticketUid,
      company_ticket_id,
      ...extra,
    })

  test('a burst to one address (any case) gives one multipart e-mail listing every ticket, after the delay', async () => {
    const started = t.clock.now()
    for (const [email, id] of [
      [`Group-${tag}@Example.com`, 'g-1'],
      [group, 'g-2'],
      [group.toUpperCase(), 'g-3'],
      [`solo-${tag}@example.com`, 's-1'],
    ] as const)
      assert.equal(
        (await transfer(email, id, { additional_info: { seat_number: `seat-${id}` } })).statusCode,
        201,
      )
    const jobs = await t.db.db
      .selectFrom('jobs')
      .select(['run_at', 'created_at'])
      .where('kind', '=', 'transfer-mail')
      .execute()
    assert.equal(jobs.length, 2, 'one pending e-mail per address')
    for (const j of jobs) assert.ok(j.run_at >= started + 60_000 && j.run_at <= j.created_at + 60_000)
    assert.equal(mailTo(group).length, 0)

    t.clock.advance(61_000)
    const [groupMail] = await waitFor(() => {
      const m = mailTo(group)
      return m.length > 0 && m
    })
    await waitFor(() => mailTo(`solo-${tag}@example.com`).length === 1)
    const { raw, mail } = groupMail!
    assert.match(raw, /Content-Type: multipart\/alternative/i)
    assert.ok(mail.text && mail.html, 'both a text and an HTML part')
    assert.match(mail.subject ?? '', /3 tickets for Summer Fest/)
    for (const id of ['g-1', 'g-2', 'g-3']) {
      assert.ok(mail.text!.includes(`seat seat-${id}`))
      assert.ok(String(mail.html).includes(`seat seat-${id}`))
    }
    assert.ok(!mail.text!.includes('seat-s-1'))
    const token = claimTokenOf(mail.text!)
    assert.ok(mail.text!.includes(`https://wristband.example/holder/links/${token}`))
    assert.ok(String(mail.html).includes(`href="https://wristband.example/holder/links/${token}"`))
    const view = (await t.request({ method: 'GET', url: `/holder/links/${token}` })).json()
    assert.equal(view.tickets.length, 3)

    // A later transfer to the same address starts the next batch on the same link.
    assert.equal((await transfer(group, 'g-4')).statusCode, 201)
    t.clock.advance(61_000)
    await waitFor(() => mailTo(group).length === 2)
    const next = mailTo(group)[1]!.mail
    assert.match(next.subject ?? '', /Your ticket for/)
    const token2 = claimTokenOf(next.text!)
    assert.notEqual(token2, token)
    assert.equal(
      (await t.request({ method: 'GET', url: `/holder/links/${token2}` })).json().tickets.length,
      4,
    )
    assert.equal(mailTo(group).length, 2)
  })

  test('the e-mail waits while the service is answering a request, and goes out once that client hangs up', async () => {
    const { port } = new URL(await t.app.listen({ host: '127.0.0.1', port: 0 }))
    const socket = net.connect(Number(port), '127.0.0.1')
    await once(socket, 'connect')
    // A sign-in whose body never ends: being answered from its headers on.
    socket.write(
      'POST /auth/login HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"email":',
    )
    const to = `waits-${tag}@example.com`
    try {
      assert.equal((await transfer(to, 'w-1')).statusCode, 201)
      t.clock.advance(61_000)
      await sleep(300) // polls every 20 ms: the due e-mail is passed over while the sign-in lasts
      assert.equal(mailTo(to).length, 0)
    } finally {
      socket.destroy()
    }
    await waitFor(() => mailTo(to).length === 1)
  })
})

eachBackend(httpBackends, 'transfer e-mail survives a restart, sent once by two instances', (backend) => {
  const tag = tagOf(backend)
  test('pending before a restart, sent once after it', async () => {
    const provisioned = await backend.provision()
    try {
      const first = await startApp(backend, env, provisioned)
      const keys = await seedPartner(first)
      const ticketUid = await newTicketType(first, keys.write)
      const res = await partnerPost(first, '/companies/transfer', keys.write, {
        event_uid: EVENT,
        email: `restart-${tag}@example.com`,
        ticket_uid: ticketUid,
        company_ticket_id: 'r-1',
      })
      assert.equal(res.statusCode, 201)
      await first.close()

      const [a, b] = [await startApp(backend, env, provisioned), await startApp(backend, env, provisioned)]
      try {
        a.clock.advance(61_000)
        b.clock.advance(61_000)
        await waitFor(async () => {
          const job = await a.db.db
            .selectFrom('jobs')
            .select('done_at')
            .where('kind', '=', 'transfer-mail')
            .executeTakeFirst()
          return job?.done_at != null
        })
        await waitFor(() => mailTo(`restart-${tag}@example.com`).length > 0)
        assert.equal(mailTo(`restart-${tag}@example.com`).length, 1)
      } finally {
        await a.close()
        await b.close()
      }
    } finally {
      await provisioned.dispose()
    }
  })
})
