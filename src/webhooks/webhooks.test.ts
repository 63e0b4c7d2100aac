import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { sql } from 'kysely'
import { Webhook } from 'standardwebhooks'
import { forEachBackend, login, startApp, type TestApp, withTwoInstances } from '../../test/helpers/app.js'
import { eachBackend, httpBackends } from '../../test/helpers/backends.js'
import {
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerGet,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { waitFor } from '../../test/helpers/until.js'

const allowPrivate = { WEBHOOK_ALLOW_PRIVATE: 'true', JOBS_POLL_MS: '20', WEBHOOK_RETRY_SCHEDULE: '5,30,120' }

function register(t: TestApp, key: string, url: string) {
  return t.request({ method: 'PUT', url: '/companies/webhook', headers: { api_key: key }, payload: { url } })
}

async function deliveries(t: TestApp, key: string) {
  const res = await partnerGet(t, '/companies/webhook/deliveries', key)
  assert.equal(res.statusCode, 200, res.body)
  return res.json().deliveries as {
    id: number
    webhook_id: string
    status: string
    attempts: number
    payload: Record<string, unknown>
    next_attempt_at: string | null
    attempt_log: {
      status_code: number | null
      error: string | null
      attempted_at: string
      response_body: string
    }[]
  }[]
}

/** Sets up a ticket and uses it; returns the transfer and the scan answer. */
async function useOne(t: TestApp, keys: PartnerKeys, scanner: string) {
  const ticketUid = await newTicketType(t, keys.write)
  const transfer = await newTransfer(t, keys.write, ticketUid)
  const res = await t.request({
    method: 'POST',
    url: `/tickets/${transfer.transfer_uid}/use`,
    token: scanner,
  })
  assert.equal(res.statusCode, 200, res.body)
  return { ...transfer, used_timestamp: res.json().used_timestamp as string }
}

forEachBackend(
  httpBackends,
  'webhooks',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let scanner: string
    let receiver: Receiver
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      scanner = (await login(t, 'op@example.com', 'operator')).access_token
      receiver = await startReceiver()
    })
    after(() => receiver.close())

    test('PUT registers and shows the secret once; GET hides it; only api:write may change it', async () => {
      assert.equal((await partnerGet(t, '/companies/webhook', keys.read)).statusCode, 404)
      assert.equal((await register(t, keys.read, receiver.url)).statusCode, 403)
      assert.equal((await register(t, keys.write, 'ftp://example.com/x')).statusCode, 422)
      const res = await register(t, keys.write, receiver.url)
      assert.equal(res.statusCode, 200, res.body)
      const { secret, url, enabled } = res.json()
      assert.match(secret, /^whsec_[A-Za-z0-9+/]+=*$/)
      assert.equal(Buffer.from(secret.slice(6), 'base64').length, 32)
      assert.equal(url, receiver.url)
      assert.equal(enabled, true)
      const shown = await partnerGet(t, '/companies/webhook', keys.read)
      assert.equal(shown.statusCode, 200)
      assert.equal(shown.json().secret, undefined)
      assert.ok(!shown.body.includes(secret.slice(6)))
      const again = (await register(t, keys.write, receiver.url)).json()
      assert.notEqual(again.secret, secret, 'a new registration issues a new secret')
    })

    test('the use notification is signed per Standard Webhooks (checked with the standardwebhooks package)', async () => {
      const { secret } = (await register(t, keys.write, receiver.url)).json()
      const before = receiver.log.length
      const used = await useOne(t, keys, scanner)
      const got = await waitFor(() => receiver.log[before])
      const payload = new Webhook(secret).verify(got.body, got.headers as Record<string, string>)
      assert.deepEqual(payload, {
        event_uid: 'summer-fest-2026',
        transfer_uid: used.transfer_uid,
        user_email: got.body.match(/"user_email":"([^"]+)"/)![1],
        company_ticket_id: used.company_ticket_id,
        status: 'USED',
        used_timestamp: used.used_timestamp,
        used_at: got.body.match(/"used_at":"([^"]+)"/)![1],
        event_timezone: 'Europe/Berlin',
      })
      // used_at is the same instant as used_timestamp, in UTC (Europe/Berlin is UTC+2 in July).
      const at = new Date(String((payload as { used_at: string }).used_at))
      assert.match(String((payload as { used_at: string }).used_at), /Z$/)
      assert.equal(
        new Intl.DateTimeFormat('sv-SE', {
          timeZone: 'Europe/Berlin',
          dateStyle: 'short',
          timeStyle: 'medium',
        })
          .format(at)
          .replace(' ', 'T'),
        used.used_timestamp.slice(0, 19),
      )
      assert.match(String(got.headers['webhook-id']), /^msg_/)
      assert.equal(got.headers['content-type'], 'application/json')
      // The check is real: a changed body or another secret fails it.
      assert.throws(() =>
        new Webhook(secret).verify(got.body.replace('USED', 'VOID'), got.headers as Record<string, string>),
      )
      const stranger = `whsec_${Buffer.alloc(32, 7).toString('base64')}`
      assert.throws(() => new Webhook(stranger).verify(got.body, got.headers as Record<string, string>))
      const [d] = await waitFor(async () => {
        const list = await deliveries(t, keys.read)
        return list[0]?.status === 'delivered' && list
      })
      assert.equal(d!.webhook_id, got.headers['webhook-id'])
      assert.equal(d!.attempt_log.length, 1)
      assert.equal(d!.attempt_log[0]!.status_code, 200)
      assert.equal(d!.attempt_log[0]!.response_body, 'ok')
    })

    test('Retry-After is honoured; the webhook-id stays the same on every attempt', async () => {
      await register(t, keys.write, receiver.url)
      receiver.script.push({ status: 503, headers: { 'retry-after': '120' }, body: 'busy' })
      const before = receiver.log.length
      await useOne(t, keys, scanner)
      await waitFor(() => receiver.log.length > before)
      const [d] = await waitFor(async () => {
        const list = await deliveries(t, keys.read)
        return list[0]?.attempts === 1 && list
      })
      assert.equal(d!.status, 'pending')
      const attemptedAt = Date.parse(d!.attempt_log[0]!.attempted_at)
      const next = Date.parse(d!.next_attempt_at!)
      assert.ok(next - attemptedAt >= 120_000, `next attempt after ${next - attemptedAt} ms, not Retry-After`)
      // The delivery row is written inside the attempt; the job's next run right after it, when the
      // runner releases the job: read it once released.
      const job = await waitFor(() =>
        t.db.db
          .selectFrom('jobs')
          .select('run_at')
          .where('dedupe_key', '=', `webhook:${d!.id}`)
          .where('locked_until', 'is', null)
          .executeTakeFirst(),
      )
      assert.ok(job.run_at - attemptedAt >= 120_000, 'the schedule (5 s) was used instead of Retry-After')
      t.clock.advance(121_000)
      await waitFor(() => receiver.log.length === before + 2)
      const [a, b] = receiver.log.slice(before)
      assert.equal(a!.headers['webhook-id'], b!.headers['webhook-id'])
      assert.notEqual(a!.headers['webhook-signature'], undefined)
      await waitFor(async () => (await deliveries(t, keys.read))[0]?.status === 'delivered')
    })

    test('redirects are not followed: a 3xx is a failed attempt', async () => {
      await register(t, keys.write, receiver.url)
      receiver.script.push({ status: 302, headers: { location: '/elsewhere' } })
      const before = receiver.log.length
      await useOne(t, keys, scanner)
      const [d] = await waitFor(async () => {
        const list = await deliveries(t, keys.read)
        return list[0]?.attempts === 1 && list
      })
      assert.equal(d!.status, 'pending')
      assert.equal(d!.attempt_log[0]!.status_code, 302)
      assert.equal(receiver.log.length, before + 1)
      assert.ok(receiver.log.every((r) => r.path !== '/elsewhere'))
      t.clock.advance(6_000)
      await waitFor(async () => (await deliveries(t, keys.read))[0]?.status === 'delivered')
    })

    test('a receiver answering 410 disables the webhook; nothing more is queued until it is registered again', async () => {
      await register(t, keys.write, receiver.url)
      receiver.script.push({ status: 410 })
      await useOne(t, keys, scanner)
      await waitFor(
        async () => (await partnerGet(t, '/companies/webhook', keys.read)).json().enabled === false,
      )
      const hook = (await partnerGet(t, '/companies/webhook', keys.read)).json()
      assert.match(hook.disabled_reason, /410/)
      assert.equal((await deliveries(t, keys.read))[0]!.status, 'failed')
      const count = (await deliveries(t, keys.read)).length
      await useOne(t, keys, scanner)
      assert.equal((await deliveries(t, keys.read)).length, count, 'a disabled webhook got a new delivery')
      const retry = await partnerPost(
        t,
        `/companies/webhook/deliveries/${(await deliveries(t, keys.read))[0]!.id}/retry`,
        keys.write,
        {},
      )
      assert.equal(retry.statusCode, 409)
      assert.equal((await register(t, keys.write, receiver.url)).json().enabled, true)
    })

    test('manual redelivery sends the same webhook-id again; other partners cannot see or retry', async () => {
      await register(t, keys.write, receiver.url)
      const before = receiver.log.length
      await useOne(t, keys, scanner)
      const [d] = await waitFor(async () => {
        const list = await deliveries(t, keys.read)
        return list[0]?.status === 'delivered' && list
      })
      assert.equal(
        (await partnerPost(t, `/companies/webhook/deliveries/${d!.id}/retry`, keys.read, {})).statusCode,
        403,
      )
      assert.equal(
        (await partnerPost(t, `/companies/webhook/deliveries/${d!.id}/retry`, keys.other, {})).statusCode,
        404,
      )
      assert.equal((await deliveries(t, keys.other)).length, 0)
      const retry = await partnerPost(t, `/companies/webhook/deliveries/${d!.id}/retry`, keys.write, {})
      assert.equal(retry.statusCode, 202, retry.body)
      await waitFor(() => receiver.log.length === before + 2)
      const [first, second] = receiver.log.slice(before)
      assert.equal(first!.headers['webhook-id'], second!.headers['webhook-id'])
      assert.equal(first!.body, second!.body)
      await waitFor(async () => (await deliveries(t, keys.read))[0]?.attempts === 2)
      assert.equal(
        (await partnerPost(t, '/companies/webhook/deliveries/999999/retry', keys.write, {})).statusCode,
        404,
      )
    })

    test('the USED transition and its notification commit together (transactional outbox)', async () => {
      await register(t, keys.write, receiver.url)
      const ticketUid = await newTicketType(t, keys.write)
      const transfer = await newTransfer(t, keys.write, ticketUid)
      // Make writing the notification fail: the use must then not happen either.
      if (t.db.dialect === 'sqlite')
        await sql`create trigger fail_outbox before insert on webhook_deliveries begin select raise(abort, 'outbox down'); end`.execute(
          t.db.db,
        )
      else {
        await sql`create function fail_outbox() returns trigger language plpgsql as $$ begin raise exception 'outbox down'; end $$`.execute(
          t.db.db,
        )
        await sql`create trigger fail_outbox before insert on webhook_deliveries for each row execute function fail_outbox()`.execute(
          t.db.db,
        )
      }
      try {
        const failed = await t.request({
          method: 'POST',
          url: `/tickets/${transfer.transfer_uid}/use`,
          token: scanner,
        })
        assert.equal(failed.statusCode, 500)
        const row = (
          await partnerGet(t, `/companies/transfer/${transfer.company_ticket_id}`, keys.read)
        ).json()
        assert.equal(row.status, 'TRANSFERRED', 'the ticket was used without its notification')
      } finally {
        await sql`drop trigger fail_outbox${t.db.dialect === 'postgres' ? sql` on webhook_deliveries` : sql``}`.execute(
          t.db.db,
        )
      }
      const before = (await deliveries(t, keys.read)).length
      const ok = await t.request({
        method: 'POST',
        url: `/tickets/${transfer.transfer_uid}/use`,
        token: scanner,
      })
      assert.equal(ok.statusCode, 200)
      const list = await deliveries(t, keys.read)
      assert.equal(list.length, before + 1)
      assert.equal(list[0]!.payload.transfer_uid, transfer.transfer_uid)
    })

    test('DELETE removes the receiver; uses then queue nothing', async () => {
      const del = await t.request({
        method: 'DELETE',
        url: '/companies/webhook',
        headers: { api_key: keys.write },
      })
      assert.equal(del.statusCode, 200)
      assert.equal((await partnerGet(t, '/companies/webhook', keys.read)).statusCode, 404)
      const count = (await deliveries(t, keys.read)).length
      await useOne(t, keys, scanner)
      assert.equal((await deliveries(t, keys.read)).length, count)
      const again = await t.request({
        method: 'DELETE',
        url: '/companies/webhook',
        headers: { api_key: keys.write },
      })
      assert.equal(again.statusCode, 404)
    })
  },
  allowPrivate,
)

eachBackend(httpBackends, 'webhook delivery across a restart', (backend) => {
  test('the receiver fails twice, the service restarts in between, the notification arrives exactly once', async () => {
    const provisioned = await backend.provision()
    const receiver = await startReceiver([
      { status: 500, body: 'down' },
      { status: 500, body: 'still down' },
    ])
    try {
      const first = await startApp(backend, allowPrivate, provisioned)
      const keys = await seedPartner(first)
      const { secret } = (await register(first, keys.write, receiver.url)).json()
      const scanner = (await login(first, 'op@example.com', 'operator')).access_token
      const used = await useOne(first, keys, scanner)
      await waitFor(async () => (await deliveries(first, keys.read))[0]?.attempts === 1)
      await first.close()

      // Two instances on the same storage: each attempt is made by one of them.
      await withTwoInstances(
        backend,
        allowPrivate,
        async (a, b) => {
          a.clock.advance(6_000)
          b.clock.advance(6_000)
          await waitFor(() => receiver.log.length === 2)
          await waitFor(async () => (await deliveries(a, keys.read))[0]?.attempts === 2)
          a.clock.advance(31_000)
          b.clock.advance(31_000)
          await waitFor(async () => (await deliveries(a, keys.read))[0]?.status === 'delivered')
          const job = await a.db.db
            .selectFrom('jobs')
            .select(['done_at', 'attempts'])
            .where('kind', '=', 'webhook')
            .executeTakeFirstOrThrow()
          assert.notEqual(job.done_at, null, 'the delivery job is finished, so nothing more will be sent')

          assert.deepEqual(
            receiver.log.map((r) => r.answered),
            [500, 500, 200],
          )
          assert.equal(new Set(receiver.log.map((r) => r.headers['webhook-id'])).size, 1)
          const delivered = receiver.log.filter((r) => r.answered === 200)
          assert.equal(delivered.length, 1, 'delivered more than once')
          const payload = new Webhook(secret).verify(
            delivered[0]!.body,
            delivered[0]!.headers as Record<string, string>,
          )
          assert.equal((payload as { transfer_uid: string }).transfer_uid, used.transfer_uid)

          const [d] = await deliveries(b, keys.read)
          assert.equal(d!.status, 'delivered')
          assert.deepEqual(
            d!.attempt_log.map((x) => x.status_code),
            [500, 500, 200],
          )
          assert.deepEqual(
            d!.attempt_log.map((x) => x.response_body),
            ['down', 'still down', 'ok'],
          )
        },
        provisioned,
      )
    } finally {
      await receiver.close()
      await provisioned.dispose()
    }
  })
})

forEachBackend(
  httpBackends,
  'webhook receivers on private addresses are refused by default',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let receiver: Receiver
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      receiver = await startReceiver()
    })
    after(() => receiver.close())

    test('registration of loopback, private, link-local and local names is 422', async () => {
      const port = new URL(receiver.url).port
      for (const url of [
        receiver.url,
        `http://localhost:${port}/x`,
        'http://[::1]/x',
        'http://[::ffff:127.0.0.1]/x',
        'http://10.1.2.3/x',
        'http://192.168.0.10/x',
        'http://169.254.169.254/latest/meta-data',
        'http://0.0.0.0/x',
      ]) {
        const res = await register(t, keys.write, url)
        assert.equal(res.statusCode, 422, `${url}: ${res.body}`)
        assert.deepEqual(res.json().detail[0].loc, ['body', 'url'])
      }
      const pub = await register(t, keys.write, 'https://93.184.215.14/hooks')
      assert.equal(pub.statusCode, 200, pub.body)
    })

    test('a receiver that turns private later (DNS rebinding) is refused at delivery', async () => {
      await register(t, keys.write, 'https://93.184.215.14/hooks')
      await t.db.db.updateTable('webhooks').set({ url: receiver.url }).execute()
      const scanner = (await login(t, 'op@example.com', 'operator')).access_token
      await useOne(t, keys, scanner)
      const [d] = await waitFor(async () => {
        const list = await deliveries(t, keys.read)
        return list[0]?.attempts === 1 && list
      })
      assert.equal(d!.status, 'pending')
      assert.match(d!.attempt_log[0]!.error ?? '', /not a public address/)
      assert.equal(d!.attempt_log[0]!.status_code, null)
      assert.equal(receiver.log.length, 0)
    })
  },
  { JOBS_POLL_MS: '20' },
)
