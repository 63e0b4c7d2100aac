import assert from 'node:assert/strict'
import { createPrivateKey } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { before, test } from 'node:test'
import { CompactSign, decodeProtectedHeader, SignJWT } from 'jose'
import { Scanner } from '../../packages/scanner/src/index.js'
import { forEachBackend, login, type TestApp, verifyToken } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  newTicketType,
  newTransfer,
  type PartnerKeys,
  partnerGet,
  seedPartner,
} from '../../test/helpers/partner.js'
import { deviceNetwork } from '../../test/helpers/scanner.js'

/**
 * Ticket codes and EdDSA offline tokens are signed by one edge key; their JOSE `typ`
 * (`wb-ticket`, `wb-offline+jwt`) tells them apart, so a code never verifies as a token and a token
 * never scans as a code, even when one is crafted with the other's claims under the edge key itself.
 */
forEachBackend(
  httpBackends,
  'ticket codes and offline tokens share the edge key, not a meaning',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let ticketUid: string
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      ticketUid = await newTicketType(t, keys.write)
    })

    test('a ticket code is not a token and a token is not a code', async () => {
      const edgeKey = createPrivateKey(fs.readFileSync(path.join(t.config.DATA_DIR, 'edge-key.pem'), 'utf8'))
      const m = await newTransfer(t, keys.write, ticketUid)
      const code = (await partnerGet(t, `/companies/transfer/${m.company_ticket_id}`, keys.read)).json()
        .ticket_code as string
      const operator = (await login(t, 'op@example.com', 'operator')).access_token
      const offline = await t.request({
        method: 'POST',
        url: '/tokens/offline',
        token: operator,
        payload: { event_id: 1 },
      })
      assert.equal(offline.statusCode, 200, offline.body)
      const token = offline.json().offline_token as string
      const { kid } = decodeProtectedHeader(code)
      assert.deepEqual(decodeProtectedHeader(code), { alg: 'EdDSA', kid, typ: 'wb-ticket' })
      assert.deepEqual(decodeProtectedHeader(token), { alg: 'EdDSA', typ: 'wb-offline+jwt', kid })

      // A code is refused wherever a token is taken, and so is a JWS with a token's claims typed as a code.
      const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString())
      const codeTyped = await new SignJWT(claims)
        .setProtectedHeader({ alg: 'EdDSA', kid, typ: 'wb-ticket' })
        .sign(edgeKey)
      const untyped = await new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', kid }).sign(edgeKey)
      for (const notAToken of [code, codeTyped, untyped]) {
        assert.deepEqual(await verifyToken(t, notAToken), { valid: false, claims: null })
        const feed = await t.request({ method: 'GET', url: '/events/1/scan-sync', token: notAToken })
        assert.equal(feed.statusCode, 401)
      }
      assert.equal((await verifyToken(t, token)).valid, true)

      // A token is refused as a code at the scanner, and so is a JWS with a code's claims typed as a token.
      const net = deviceNetwork(t)
      const scanner = new Scanner({
        baseUrl: 'http://wristband.test',
        eventId: 1,
        token,
        now: () => t.clock.now(),
        fetch: net.fetch,
      })
      await scanner.sync()
      const payload = code.split('.')[1]!
      const fresh = JSON.parse(Buffer.from(payload, 'base64url').toString())
      const tokenTyped = await new CompactSign(Buffer.from(JSON.stringify({ ...fresh, t: 'f'.repeat(32) })))
        .setProtectedHeader({ alg: 'EdDSA', kid, typ: 'wb-offline+jwt' })
        .sign(edgeKey)
      for (const notACode of [token, tokenTyped])
        assert.deepEqual(await scanner.scan(notACode), { status: 'FORGED', reason: 'not a ticket code' })
      // The same claims typed as a code scan: the header alone made the difference.
      const codeShaped = await new CompactSign(Buffer.from(JSON.stringify({ ...fresh, t: 'f'.repeat(32) })))
        .setProtectedHeader({ alg: 'EdDSA', kid, typ: 'wb-ticket' })
        .sign(edgeKey)
      assert.equal((await scanner.scan(codeShaped)).status, 'VALID')
      assert.equal((await scanner.scan(code)).status, 'VALID')
    })
  },
  { OFFLINE_TOKEN_ALG: 'EdDSA' },
)
