import assert from 'node:assert/strict'
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { calculateJwkThumbprint, compactVerify, createLocalJWKSet, decodeProtectedHeader } from 'jose'
import { forEachBackend, login, startApp, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  claimTokenOf,
  consumerToken,
  customerId,
  deviceToken,
  newTicketType,
  newTransfer,
  outboxMail,
  type PartnerKeys,
  partnerGet,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'
import { waitFor } from '../../test/helpers/until.js'
import { qrDataUrl, qrPng } from './qr.js'
import { codeDigest } from './ticket-codes.js'

const jwksOf = async (t: TestApp) =>
  (await t.request({ method: 'GET', url: '/.well-known/jwks.json' })).json()

async function verifyCode(t: TestApp, code: string) {
  const { payload } = await compactVerify(code, createLocalJWKSet(await jwksOf(t)), { algorithms: ['EdDSA'] })
  return JSON.parse(new TextDecoder().decode(payload))
}

forEachBackend(
  httpBackends,
  'edge key, ticket codes and the scanner sync feed',
  (ctx) => {
    let t: TestApp
    let keys: PartnerKeys
    let ticketUid: string
    let device: string
    before(async () => {
      t = ctx()
      keys = await seedPartner(t)
      ticketUid = await newTicketType(t, keys.write)
      device = deviceToken(t, 1, 1)
    })

    const feed = (token: string | undefined, query = '', eventId = 1) =>
      t.request({ method: 'GET', url: `/events/${eventId}/scan-sync${query}`, ...(token ? { token } : {}) })
    const reissue = (companyTicketId: string, key = keys.write) =>
      partnerPost(t, `/companies/transfer/${encodeURIComponent(companyTicketId)}/reissue`, key, undefined)

    test('GET /.well-known/jwks.json publishes the Ed25519 public key with a kid and cache headers, never the private part', async () => {
      const res = await t.request({ method: 'GET', url: '/.well-known/jwks.json' })
      assert.equal(res.statusCode, 200)
      assert.match(String(res.headers['cache-control']), /max-age=\d+/)
      const { keys: list } = res.json()
      assert.equal(list.length, 1)
      assert.equal(list[0].kty, 'OKP')
      assert.equal(list[0].crv, 'Ed25519')
      assert.equal(list[0].alg, 'EdDSA')
      assert.equal(list[0].d, undefined)
      assert.equal(list[0].kid, (await calculateJwkThumbprint(list[0])).slice(0, 11))
      // Generated outside production into DATA_DIR, readable by the owner only.
      const file = path.join(t.config.DATA_DIR, 'edge-key.pem')
      assert.equal(fs.statSync(file).mode & 0o777, 0o600)
    })

    test('every transfer gets a signed code: in the partner answers, the e-mail and link page (with its QR image) and the consumer tickets', async () => {
      const email = `codes-${Date.now()}@example.com`
      const before = outboxMail(t).length
      const created = await partnerPost(t, '/companies/transfer', keys.write, {
        event_uid: 'summer-fest-2026',
        email,
        ticket_uid: ticketUid,
        company_ticket_id: `codes-${Date.now()}`,
      })
      assert.equal(created.statusCode, 201, created.body)
      const { ticket_code: code, transfer_uid, company_ticket_id } = created.json()
      assert.ok(code.length < 400, `a code of ${code.length} characters`)
      const claims = await verifyCode(t, code)
      assert.equal(claims.e, 1)
      assert.equal(claims.t, transfer_uid)
      assert.equal(claims.k, ticketUid)
      assert.equal(claims.n, 1)
      assert.ok(claims.exp > claims.nbf && claims.nbf <= Math.floor(t.clock.now() / 1000))
      assert.equal(decodeProtectedHeader(code).kid, (await jwksOf(t)).keys[0].kid)

      const detail = await partnerGet(t, `/companies/transfer/${company_ticket_id}`, keys.read)
      assert.equal(detail.json().ticket_code, code)
      t.clock.advance(61_000)
      const mail = await waitFor(() =>
        outboxMail(t)
          .slice(before)
          .find((m) => m.to === email),
      )
      // The e-mail shows the code as a QR image (an inline attachment) and as text.
      assert.ok(mail.text.includes(code))
      assert.match(mail.html!, /<img src="cid:ticket-1@wristband"/)
      const image = (
        mail as unknown as { attachments: { cid: string; contentType: string; content: string }[] }
      ).attachments[0]!
      assert.equal(image.cid, 'ticket-1@wristband')
      assert.equal(image.contentType, 'image/png')
      assert.equal(image.content, qrPng(code).toString('base64'))
      const token = claimTokenOf(mail.text)
      const link = await t.request({ method: 'GET', url: `/holder/links/${token}` })
      assert.equal(link.json().tickets[0].ticket_code, code)
      assert.equal(link.json().tickets[0].ticket_qr, qrDataUrl(code))
      const alice = consumerToken(t, await customerId(t, '+4915100000003'))
      const claim = await t.request({ method: 'POST', url: `/holder/links/${token}/claim`, token: alice })
      assert.equal(claim.statusCode, 200, claim.body)
      const mine = await t.request({ method: 'GET', url: '/consumers/me/tickets', token: alice })
      assert.equal(
        mine.json().tickets.find((x: { transfer_uid: string }) => x.transfer_uid === transfer_uid)
          .ticket_code,
        code,
      )
    })

    test('the feed needs ticket:scan or sync:download of the event: 401 without a token, 403 for any other event, also one that does not exist', async () => {
      assert.equal((await feed(undefined)).statusCode, 401)
      const otherOperator = (await login(t, 'op2@example.com', 'operator')).access_token
      assert.equal((await feed(otherOperator)).statusCode, 403)
      assert.equal((await feed(deviceToken(t, 1, 2))).statusCode, 403)
      assert.equal((await feed(consumerToken(t, 1))).statusCode, 403)
      const root = (await login(t, 'root@example.com')).access_token
      assert.equal((await feed(root)).statusCode, 403, 'an administrator holds neither scope')
      assert.equal((await feed(device, '', 999)).statusCode, 403)
      assert.equal((await feed(device, '?cursor=abc')).statusCode, 422)
      assert.equal((await feed(device, '?limit=0')).statusCode, 422)
      const operator = (await login(t, 'op@example.com', 'operator')).access_token
      assert.equal((await feed(operator)).statusCode, 200)
      assert.equal((await feed(device)).statusCode, 200)
    })

    test('a full sync pages through every ticket once; an empty delta is empty; a use and a re-issue come back as changes', async () => {
      const made = []
      for (let i = 0; i < 5; i++) made.push(await newTransfer(t, keys.write, ticketUid))
      // Full sync, two at a time.
      const seen = new Map<string, { digest: string; change: string }>()
      let cursor: string | undefined
      for (;;) {
        const page = (await feed(device, `?limit=2${cursor ? `&cursor=${cursor}` : ''}`)).json()
        assert.deepEqual(page.key_ids, [(await jwksOf(t)).keys[0].kid])
        for (const e of page.tickets) {
          assert.equal(seen.has(e.transfer_uid), false, 'each ticket once')
          seen.set(e.transfer_uid, e)
        }
        cursor = page.cursor
        if (!page.has_more) break
      }
      const total = Number(
        (
          await t.db.db
            .selectFrom('transfers')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('event_id', '=', 1)
            .executeTakeFirstOrThrow()
        ).n,
      )
      assert.equal(seen.size, total)
      for (const m of made) {
        const detail = (await partnerGet(t, `/companies/transfer/${m.company_ticket_id}`, keys.read)).json()
        assert.equal(seen.get(m.transfer_uid)?.digest, codeDigest(detail.ticket_code))
      }
      const empty = (await feed(device, `?cursor=${cursor}`)).json()
      assert.deepEqual(empty.tickets, [])
      assert.equal(empty.cursor, cursor)
      assert.equal(empty.has_more, false)

      const operator = (await login(t, 'op@example.com', 'operator')).access_token
      const used = await t.request({
        method: 'POST',
        url: `/tickets/${made[0]!.transfer_uid}/use`,
        token: operator,
        payload: { access_gate: 'North' },
      })
      assert.equal(used.statusCode, 200)
      const old = (await partnerGet(t, `/companies/transfer/${made[1]!.company_ticket_id}`, keys.read)).json()
        .ticket_code
      const again = await reissue(made[1]!.company_ticket_id)
      assert.equal(again.statusCode, 200, again.body)
      assert.equal(again.json().code_version, 2)
      assert.notEqual(again.json().ticket_code, old)
      assert.equal((await verifyCode(t, again.json().ticket_code)).n, 2)

      const delta = (await feed(device, `?cursor=${cursor}`)).json()
      assert.deepEqual(
        delta.tickets.map((e: { transfer_uid: string; change: string }) => [e.transfer_uid, e.change]),
        [
          [made[0]!.transfer_uid, 'used'],
          [made[1]!.transfer_uid, 'revoked'],
        ],
      )
      assert.equal(delta.tickets[0].used_timestamp, used.json().used_timestamp)
      assert.equal(delta.tickets[0].used_at, used.json().used_at, 'the feed carries used_at (UTC) too')
      assert.match(delta.tickets[0].used_at, /Z$/)
      assert.equal(delta.tickets[1].used_at, null)
      assert.equal(delta.tickets[0].used_gate, 'North')
      assert.equal(delta.tickets[1].version, 2)
      assert.equal(delta.tickets[1].digest, codeDigest(again.json().ticket_code))
    })

    test('re-issue: a used ticket keeps its code (409), an unknown one is 404, a read-only key 403', async () => {
      const m = await newTransfer(t, keys.write, ticketUid)
      assert.equal((await reissue(m.company_ticket_id, keys.read)).statusCode, 403)
      assert.equal((await reissue('no-such-ticket')).statusCode, 404)
      const operator = (await login(t, 'op@example.com', 'operator')).access_token
      await t.request({ method: 'POST', url: `/tickets/${m.transfer_uid}/use`, token: operator })
      const res = await reissue(m.company_ticket_id)
      assert.equal(res.statusCode, 409)
      assert.equal(res.json().error, 'already_used')
    })
  },
  { TRANSFER_EMAIL_DELAY_SECONDS: '60', JOBS_POLL_MS: '20' },
)

describe('configured edge keys', () => {
  let t: TestApp
  const current = generateKeyPairSync('ed25519')
  const previous = generateKeyPairSync('ed25519')
  const body = (pem: string) => pem.replace(/-----[A-Z ]+-----|\s/g, '')
  before(async () => {
    t = await startApp(httpBackends[0]!, {
      EDGE_SIGNING_KEY: body(current.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()),
      EDGE_PREVIOUS_KEYS: body(previous.publicKey.export({ format: 'pem', type: 'spki' }).toString()),
    })
  })
  after(() => t.close())

  test('EDGE_SIGNING_KEY signs and is published first; EDGE_PREVIOUS_KEYS stay published for rotation', async () => {
    const { keys } = await jwksOf(t)
    assert.equal(keys.length, 2)
    const thumb = async (k: typeof current.publicKey) =>
      (await calculateJwkThumbprint(k.export({ format: 'jwk' }) as never)).slice(0, 11)
    assert.equal(keys[0].kid, await thumb(current.publicKey))
    assert.equal(keys[1].kid, await thumb(previous.publicKey))
    assert.equal(fs.existsSync(path.join(t.config.DATA_DIR, 'edge-key.pem')), false)
  })
})

forEachBackend(httpBackends, 'edge key rotation', (ctx) => {
  const pkcs8 = (k: KeyObject) =>
    k
      .export({ format: 'pem', type: 'pkcs8' })
      .toString()
      .replace(/-----[A-Z ]+-----|\s/g, '')
  const spki = (k: KeyObject) =>
    k
      .export({ format: 'pem', type: 'spki' })
      .toString()
      .replace(/-----[A-Z ]+-----|\s/g, '')

  test('after a rotation only the current key signs: an old code comes back with the same claims under the new key, and still scans while the old key is published', async () => {
    const first = ctx()
    const keys = await seedPartner(first)
    const type = await newTicketType(first, keys.write)
    const m = await newTransfer(first, keys.write, type)
    const read = async (t: TestApp) =>
      (await partnerGet(t, `/companies/transfer/${m.company_ticket_id}`, keys.read)).json()
        .ticket_code as string
    const before = await read(first)
    assert.equal(await read(first), before, 'the same code on every read')
    const old = createPrivateKey(fs.readFileSync(path.join(first.config.DATA_DIR, 'edge-key.pem'), 'utf8'))
    const next = generateKeyPairSync('ed25519').privateKey
    const payloadOf = (code: string) => code.split('.')[1]
    // A second instance on the same database with the rotated configuration; the old private key given
    // as a previous key is used for its public half only.
    const env = { ...processEnvOf(first), EDGE_SIGNING_KEY: pkcs8(next), EDGE_PREVIOUS_KEYS: pkcs8(old) }
    // The backend object only provisions; with storage given it is not consulted.
    const second = await startApp(httpBackends[0]!, env, { env, dispose: async () => {} })
    let shown: string
    try {
      const newKid = (await jwksOf(second)).keys[0].kid
      shown = await read(second)
      assert.notEqual(shown, before)
      assert.deepEqual(decodeProtectedHeader(shown), { alg: 'EdDSA', kid: newKid, typ: 'wb-ticket' })
      assert.equal(payloadOf(shown), payloadOf(before), 'the same claims, version included')
      assert.equal(await read(second), shown, 'deterministic under the new key')
      await verifyCode(second, shown)
      await verifyCode(second, before)
      const fresh = await newTransfer(second, keys.write, type)
      const code = (
        await partnerGet(second, `/companies/transfer/${fresh.company_ticket_id}`, keys.read)
      ).json().ticket_code
      assert.equal(decodeProtectedHeader(code).kid, newKid)
    } finally {
      await second.close()
    }
    // With the old key as a public key the service shows the same code; once the old key is gone, the
    // old code no longer verifies and the shown one does.
    const publicOnly = {
      ...processEnvOf(first),
      EDGE_SIGNING_KEY: pkcs8(next),
      EDGE_PREVIOUS_KEYS: spki(createPublicKey(old)),
    }
    const third = await startApp(httpBackends[0]!, publicOnly, { env: publicOnly, dispose: async () => {} })
    try {
      await verifyCode(third, before)
      assert.equal(await read(third), shown)
    } finally {
      await third.close()
    }
    const gone = { ...processEnvOf(first), EDGE_SIGNING_KEY: pkcs8(next) }
    const fourth = await startApp(httpBackends[0]!, gone, { env: gone, dispose: async () => {} })
    try {
      await verifyCode(fourth, shown)
      await assert.rejects(verifyCode(fourth, before))
    } finally {
      await fourth.close()
    }
  })
})

/** The storage settings of a running test app, to start another instance on the same database. */
function processEnvOf(t: TestApp): Record<string, string> {
  return {
    DATA_DIR: t.config.DATA_DIR,
    DATABASE_URL: t.config.databaseUrl,
    DATABASE_SCHEMA: t.config.DATABASE_SCHEMA,
  }
}
