// examples/partner-quickstart runs against the service on a socket, so the example stays true.
import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { before, test } from 'node:test'
import { quickstart } from '../../../examples/partner-quickstart/quickstart.js'
import { forEachBackend, login, type TestApp } from '../../../test/helpers/app.js'
import { httpBackends } from '../../../test/helpers/backends.js'
import { type PartnerKeys, seedPartner } from '../../../test/helpers/partner.js'

forEachBackend(
  httpBackends,
  'examples/partner-quickstart',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let baseUrl: string
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      await t.app.listen({ port: 0, host: '127.0.0.1' })
      baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`
    })

    test('the quickstart sends a ticket, and gets the verified use notification when a gate scans it', async () => {
      const lines: string[] = []
      const scanner = (await login(t, 'op@example.com', 'operator')).access_token
      const scans: Promise<Response>[] = []
      let uid: string | undefined
      const notification = await quickstart({
        baseUrl,
        apiKey: keys.write,
        eventUid: 'summer-fest-2026',
        receiverPort: 0,
        orderLine: 'order-2001-1',
        log: (line) => {
          lines.push(line)
          uid = /^ticket transferred: ([0-9a-f]{32})$/.exec(line)?.[1] ?? uid
          // The gate scans the ticket once the script waits for it.
          if (line.startsWith('waiting for the ticket') && uid)
            scans.push(
              fetch(`${baseUrl}/tickets/${uid}/use`, {
                method: 'POST',
                headers: { authorization: `Bearer ${scanner}` },
              }),
            )
        },
      })
      assert.equal(scans.length, 1)
      assert.equal((await scans[0]!).status, 200)
      assert.equal(notification.company_ticket_id, 'order-2001-1')
      assert.equal(notification.status, 'USED')
      assert.match(lines.join('\n'), /transfer order-2001-1: TRANSFERRED, balance 20/)
      assert.match(lines.at(-1)!, /^ticket used: order-2001-1 at /)
    })
  },
  { WEBHOOK_ALLOW_PRIVATE: 'true', JOBS_POLL_MS: '20' },
)
