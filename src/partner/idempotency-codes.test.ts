import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { compactVerify, createLocalJWKSet } from 'jose'
import type { Kysely } from 'kysely'
import { forEachBackend, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import {
  deviceToken,
  newTicketType,
  type PartnerKeys,
  partnerPost,
  seedPartner,
} from '../../test/helpers/partner.js'
import { codeDigest } from '../edge/ticket-codes.js'
import { up as migration021 } from '../platform/db/migrations/021-idempotency-without-codes.js'

const EVENT = 'summer-fest-2026'

/**
 * Audit finding F1: an Idempotency-Key record kept the whole answer, ticket codes included, for 24 hours,
 * and a replay after a re-issue answered the revoked code. Records now keep no code; a replay renders
 * the transfer's current one.
 */
forEachBackend(httpBackends, 'Idempotency-Key records keep no ticket codes', (ctx) => {
  let t: TestApp
  let keys: PartnerKeys
  let ticket: string
  before(async () => {
    t = ctx()
    keys = await seedPartner(t)
    ticket = await newTicketType(t, keys.write)
  })

  const transfer = (id: string) => ({
    event_uid: EVENT,
    email: `${id}@example.com`,
    ticket_uid: ticket,
    company_ticket_id: id,
  })
  const single = (id: string, key: string) =>
    partnerPost(t, '/companies/transfer', keys.write, transfer(id), { 'idempotency-key': key })
  const batch = (items: unknown[], key: string) =>
    partnerPost(
      t,
      '/companies/transfers',
      keys.write,
      { event_uid: EVENT, transfers: items },
      { 'idempotency-key': key },
    )
  const reissue = async (id: string): Promise<string> => {
    const res = await partnerPost(t, `/companies/transfer/${id}/reissue`, keys.write, undefined)
    assert.equal(res.statusCode, 200, res.body)
    return res.json().ticket_code
  }
  const stored = async (key: string): Promise<string> =>
    (
      await t.db.db
        .selectFrom('idempotency_keys')
        .select('response')
        .where('key', '=', key)
        .executeTakeFirstOrThrow()
    ).response!
  /** What the previous release kept: the whole answer, codes included. */
  const storeAsPreviousRelease = (key: string, answer: unknown) =>
    t.db.db
      .updateTable('idempotency_keys')
      .set({ response: JSON.stringify(answer) })
      .where('key', '=', key)
      .execute()
  /** The claims of a code the event's published key verifies (as a scanner does), and its version. */
  const verified = async (code: string) => {
    const jwks = (await t.request({ method: 'GET', url: '/.well-known/jwks.json' })).json()
    const { payload } = await compactVerify(code, createLocalJWKSet(jwks), { algorithms: ['EdDSA'] })
    return JSON.parse(new TextDecoder().decode(payload)) as { t: string; n: number }
  }
  /** The digest the scanners' sync feed holds for a transfer (its current code's). */
  const gateDigest = async (transferUid: string) => {
    const device = deviceToken(t, 1, 1)
    let cursor = '0'
    let digest: string | undefined
    for (;;) {
      const page = (
        await t.request({ method: 'GET', url: `/events/1/scan-sync?cursor=${cursor}`, token: device })
      ).json()
      for (const e of page.tickets) if (e.transfer_uid === transferUid) digest = e.digest
      if (!page.has_more) return digest
      cursor = page.cursor
    }
  }

  test('a transfer: the record holds no code; a replay after a re-issue answers the current code', async () => {
    const first = await single('idem-code-1', 'idem-code-key-1')
    assert.equal(first.statusCode, 201, first.body)
    const code1: string = first.json().ticket_code
    assert.equal((await verified(code1)).n, 1)

    const row = await stored('idem-code-key-1')
    assert.ok(!row.includes(code1), 'the record holds the ticket code')
    assert.deepEqual(JSON.parse(row), { ...first.json(), ticket_code: null })

    // Replayed before any re-issue: the same answer, code included.
    const again = await single('idem-code-1', 'idem-code-key-1')
    assert.equal(again.statusCode, 201)
    assert.equal(again.headers['idempotent-replayed'], 'true')
    assert.deepEqual(again.json(), first.json())

    const code2 = await reissue('idem-code-1')
    const replay = await single('idem-code-1', 'idem-code-key-1')
    assert.equal(replay.statusCode, 201)
    assert.equal(replay.headers['idempotent-replayed'], 'true')
    assert.deepEqual(replay.json(), { ...first.json(), ticket_code: code2 })
    const claims = await verified(replay.json().ticket_code)
    assert.deepEqual([claims.t, claims.n], [first.json().transfer_uid, 2])
    assert.equal(await gateDigest(first.json().transfer_uid), codeDigest(replay.json().ticket_code))
    assert.ok(!(await stored('idem-code-key-1')).includes(code2))
  })

  test('a batch: no codes kept; a replay answers each made transfer with its current code, errors as answered', async () => {
    const items = [
      { email: 'b1@example.com', ticket_uid: ticket, company_ticket_id: 'idem-b-1' },
      { email: 'b2@example.com', ticket_uid: ticket, company_ticket_id: 'idem-b-2' },
      { email: 'b3@example.com', ticket_uid: 'f'.repeat(32), company_ticket_id: 'idem-b-3' },
      { email: 'b4@example.com', ticket_uid: ticket, company_ticket_id: 'idem-b-1' },
    ]
    const first = await batch(items, 'idem-batch-1')
    assert.equal(first.statusCode, 200, first.body)
    const results = first.json().results
    assert.deepEqual(
      results.map((r: { status: number }) => r.status),
      [201, 201, 404, 409],
    )
    const codes: string[] = results
      .slice(0, 2)
      .map((r: { transfer: { ticket_code: string } }) => r.transfer.ticket_code)
    const row = await stored('idem-batch-1')
    for (const code of codes) assert.ok(!row.includes(code), 'the record holds a ticket code')
    assert.deepEqual(JSON.parse(row).results[2], results[2])
    assert.deepEqual(JSON.parse(row).results[3], results[3])

    const renewed = await reissue('idem-b-2')
    const replay = await batch(items, 'idem-batch-1')
    assert.equal(replay.statusCode, 200)
    assert.equal(replay.headers['idempotent-replayed'], 'true')
    const expected = structuredClone(results)
    expected[1].transfer.ticket_code = renewed
    assert.deepEqual(replay.json().results, expected)
    assert.equal((await verified(replay.json().results[1].transfer.ticket_code)).n, 2)
    assert.equal((await verified(replay.json().results[0].transfer.ticket_code)).n, 1)
  })

  test('a record of the previous release (codes kept) replays the current code and is kept again without it', async () => {
    const first = await single('idem-old-1', 'idem-old-key-1')
    assert.equal(first.statusCode, 201, first.body)
    const code1: string = first.json().ticket_code
    await storeAsPreviousRelease('idem-old-key-1', first.json())
    const code2 = await reissue('idem-old-1')
    const replay = await single('idem-old-1', 'idem-old-key-1')
    assert.equal(replay.statusCode, 201)
    assert.equal(replay.headers['idempotent-replayed'], 'true')
    assert.deepEqual(replay.json(), { ...first.json(), ticket_code: code2 })
    assert.ok(
      !(await stored('idem-old-key-1')).includes(code1),
      'the old record still holds the revoked code',
    )

    const items = [{ email: 'ob@example.com', ticket_uid: ticket, company_ticket_id: 'idem-old-b-1' }]
    const made = await batch(items, 'idem-old-batch-1')
    assert.equal(made.statusCode, 200, made.body)
    const batchCode: string = made.json().results[0].transfer.ticket_code
    await storeAsPreviousRelease('idem-old-batch-1', made.json())
    const renewed = await reissue('idem-old-b-1')
    const again = await batch(items, 'idem-old-batch-1')
    assert.equal(again.json().results[0].transfer.ticket_code, renewed)
    assert.ok(!(await stored('idem-old-batch-1')).includes(batchCode))
    // The same key with another body is still 422, whatever the record's format.
    const other = await partnerPost(t, '/companies/transfer', keys.write, transfer('idem-old-2'), {
      'idempotency-key': 'idem-old-key-1',
    })
    assert.equal(other.statusCode, 422)
  })

  test('migration 021 clears the codes from the records kept before it, and leaves the rest', async () => {
    const one = await single('idem-mig-1', 'idem-mig-key-1')
    const many = await batch(
      [
        { email: 'm1@example.com', ticket_uid: ticket, company_ticket_id: 'idem-mig-b-1' },
        { email: 'm2@example.com', ticket_uid: 'f'.repeat(32), company_ticket_id: 'idem-mig-b-2' },
      ],
      'idem-mig-key-2',
    )
    const refused = await single('idem-mig-1', 'idem-mig-key-3')
    assert.deepEqual([one.statusCode, many.statusCode, refused.statusCode], [201, 200, 409])
    await storeAsPreviousRelease('idem-mig-key-1', one.json())
    await storeAsPreviousRelease('idem-mig-key-2', many.json())
    const error = await stored('idem-mig-key-3')

    await migration021(t.db.db as unknown as Kysely<unknown>)

    const kept1 = await stored('idem-mig-key-1')
    assert.ok(!kept1.includes(one.json().ticket_code))
    assert.deepEqual(JSON.parse(kept1), { ...one.json(), ticket_code: null })
    const kept2 = JSON.parse(await stored('idem-mig-key-2'))
    const expected = structuredClone(many.json())
    expected.results[0].transfer.ticket_code = null
    assert.deepEqual(kept2, expected)
    assert.equal(await stored('idem-mig-key-3'), error)
    // Replays of the rewritten records still answer the code.
    const replay = await single('idem-mig-1', 'idem-mig-key-1')
    assert.equal(replay.json().ticket_code, one.json().ticket_code)
  })
})
