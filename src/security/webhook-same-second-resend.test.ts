import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { WebhookReceiver } from '../../packages/partner-client/src/webhooks.js'
import { ACTIVITY_ENV } from '../../test/helpers/activity.js'
import { forEachBackend, login, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { newTicketType, newTransfer, type PartnerKeys, seedPartner } from '../../test/helpers/partner.js'
import { until } from '../../test/helpers/until.js'

/**
 * Third audit (docs/security.md): "WebhookReceiver refuses a same-second resend of the same delivery",
 * although the partner client's README says a resend is accepted. The receiver keys a message by its
 * id and signed second, and the signature is a function of id, second and body, so a resend signed in
 * the second of the previous attempt was that attempt again. The service now signs each attempt of a
 * delivery at a later second than the one before; a true replay stays refused.
 */
forEachBackend(
  httpBackends,
  'webhook resends within one second',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let server: http.Server
    const handled: string[] = []
    const answers: number[] = []
    const seen: { headers: Record<string, string>; body: string }[] = []
    let receiver: WebhookReceiver | undefined
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      // The partner's endpoint, built with the client's receiver; it keeps what it was sent.
      server = http.createServer((req, res) => {
        const chunks: Buffer[] = []
        req.on('data', (c: Buffer) => chunks.push(c))
        req.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8')
          const headers = Object.fromEntries(
            ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((h) => [h, String(req.headers[h])]),
          )
          seen.push({ headers, body })
          let status = 204
          try {
            handled.push(receiver!.verify(body, headers).id)
          } catch {
            status = 400
          }
          answers.push(status)
          res.writeHead(status).end()
        })
      })
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`
      const hook = await t.request({
        method: 'PUT',
        url: '/companies/webhook',
        headers: { api_key: keys.write },
        payload: { url },
      })
      assert.equal(hook.statusCode, 200, hook.body)
      // The receiver's clock is the service's: the test freezes both.
      receiver = new WebhookReceiver({ secret: hook.json().secret, now: () => t.clock.now() })
    })
    after(async () => {
      t.clock.thaw()
      server.closeAllConnections()
      await new Promise((r) => server.close(r))
    })

    test('WebhookReceiver refuses a same-second resend of the same delivery: accepted now, a true replay refused', async () => {
      const ticket = await newTransfer(t, keys.write, await newTicketType(t, keys.write))
      t.clock.freeze()
      const operator = (await login(t, 'op@example.com', 'operator')).access_token
      const use = await t.request({
        method: 'POST',
        url: `/tickets/${ticket.transfer_uid}/use`,
        token: operator,
      })
      assert.equal(use.statusCode, 200, use.body)
      await until('the notification delivered', () => answers.length === 1)
      const list = await t.request({
        method: 'GET',
        url: '/companies/webhook/deliveries',
        headers: { api_key: keys.write },
      })
      const id = list.json().deliveries[0].id
      /** The delivery's job has finished (a resend while an attempt is in flight joins that attempt). */
      const settled = async () =>
        (await t.db.db
          .selectFrom('jobs')
          .select('id')
          .where('dedupe_key', '=', `webhook:${id}`)
          .executeTakeFirst()) === undefined
      // Resent twice within the same second of the service's clock (frozen): each is a new signed request.
      for (let i = 0; i < 2; i++) {
        await until('the previous attempt finished', settled)
        const retry = await t.request({
          method: 'POST',
          url: `/companies/webhook/deliveries/${id}/retry`,
          headers: { api_key: keys.write },
        })
        assert.equal(retry.statusCode, 202, retry.body)
        await until('the resend delivered', () => answers.length === i + 2)
      }
      assert.deepEqual(answers, [204, 204, 204], 'every resend accepted')
      assert.equal(new Set(handled).size, 1, 'one notification (one webhook-id), handled three times')
      const seconds = seen.map((s) => Number(s.headers['webhook-timestamp']))
      assert.deepEqual(seconds, [seconds[0]!, seconds[0]! + 1, seconds[0]! + 2])
      // A captured request sent again is a replay: refused.
      assert.throws(() => receiver!.verify(seen[1]!.body, seen[1]!.headers), /replay/)
    })
  },
  ACTIVITY_ENV,
)
