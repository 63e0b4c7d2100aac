import assert from 'node:assert/strict'
import { test } from 'node:test'
import pino from 'pino'
import { eachBackend, httpBackends, useDatabase } from '../../../test/helpers/backends.js'
import { TestClock } from '../../../test/helpers/clock.js'
import { partnerNamed } from '../../api-keys/api-keys.store.js'
import { insertDevice } from '../../devices/devices.store.js'
import { insertSetupCode, takeSetupCode } from '../../devices/setup-codes.store.js'
import { upsertEvent } from '../../events/events.store.js'
import { openLink } from '../../holder/holder.store.js'
import { upsertAdministrator } from '../../identities/identities.store.js'
import { reserveKey, takeOverKey } from '../../partner/idempotency.store.js'
import { findTicketType, insertTicketType } from '../../partner/partner.store.js'
import { takeTransfersToMail } from '../../partner/transfer-mail.js'
import { consumeToken, findLiveToken, insertResetToken } from '../../password-reset/password-reset.store.js'
import { insertRefresh, markRotated } from '../../tokens/refresh.store.js'
import { issueTransfer } from '../../transfers/transfers.store.js'
import { enqueue, JobRunner } from '../jobs/jobs.js'

/**
 * The store contract: writes where the first of several concurrent requests must win, and every other
 * one must see that it lost, run on every dialect. Each case starts RACERS calls at once (on PostgreSQL
 * over separate pool connections, so they do race) and expects exactly one winner.
 */
const RACERS = 8

eachBackend(httpBackends, 'store contract: the first request wins', (backend) => {
  const database = useDatabase(backend)
  const clock = new TestClock()
  const race = <T>(call: (i: number) => Promise<T>) =>
    Promise.all(Array.from({ length: RACERS }, (_, i) => call(i)))
  const wins = (results: boolean[]) => results.filter(Boolean).length

  test('refresh rotation: one of concurrent rotations of a token wins', async () => {
    const now = clock.now()
    await insertRefresh(database.handle().db, {
      jti: 'rt-contract',
      family_id: 'fam-contract',
      subject_kind: 'admin',
      subject_id: 1,
      expires_at: now + 3_600_000,
      created_at: now,
      mfa_verified_at: null,
    })
    assert.equal(wins(await race(() => markRotated(database.handle().db, 'rt-contract', clock.now()))), 1)
    assert.equal(await markRotated(database.handle().db, 'rt-contract', clock.now()), false, 'rotated twice')
  })

  test('password reset: one of concurrent uses of a link wins', async () => {
    const now = clock.now()
    const adminId = await upsertAdministrator(
      database.handle().db,
      'contract@example.com',
      { password_hash: 'x', role: 'admin', event_ids: '[]', updated_at: now },
      now,
    )
    await insertResetToken(database.handle().db, {
      admin_id: adminId,
      token_hash: 'contract-hash',
      expires_at: now + 3_600_000,
      created_at: now,
    })
    const live = await findLiveToken(database.handle().db, 'contract-hash', now)
    assert.ok(live)
    assert.equal(wins(await race(() => consumeToken(database.handle().db, live.id, clock.now()))), 1)
    assert.equal(await findLiveToken(database.handle().db, 'contract-hash', clock.now()), undefined)
  })

  test('idempotency: one of concurrent requests with a key reserves it, one takes over an abandoned one', async () => {
    const k = { apiKeyId: 1, key: 'contract-key' }
    assert.equal(wins(await race(() => reserveKey(database.handle().db, k, 'h1', clock.now()))), 1)
    // Left unanswered: concurrent retries of the same request, of which one takes it over.
    clock.advance(120_000)
    const abandonedBefore = clock.now() - 60_000
    assert.equal(
      wins(await race(() => takeOverKey(database.handle().db, k, 'h1', clock.now(), abandonedBefore))),
      1,
    )
    // Another request under the same key never takes it over.
    clock.advance(120_000)
    assert.equal(await takeOverKey(database.handle().db, k, 'h2', clock.now(), clock.now() - 60_000), false)
  })

  test('device set-up: one of concurrent exchanges of a code takes it', async () => {
    const db = database.handle().db
    const now = clock.now()
    const eventId = await upsertEvent(db, { uid: 'contract-setup', name: 'Setup', timezone: 'UTC' }, now)
    const deviceId = await insertDevice(db, {
      dev_mac: 'CO:NT:RA:CT:00:01',
      event_id: eventId,
      operator_id: null,
      key_hash: 'x'.repeat(64),
      created_at: now,
    })
    await insertSetupCode(db, {
      device_id: deviceId,
      code_hash: 'contract-setup-hash',
      created_by: 'cli',
      created_at: now,
      expires_at: now + 600_000,
    })
    const taken = await race(() => takeSetupCode(db, 'contract-setup-hash', clock.now()))
    assert.deepEqual(
      taken.filter((id) => id !== undefined),
      [deviceId],
    )
    assert.equal(await takeSetupCode(db, 'contract-setup-hash', clock.now()), undefined, 'taken twice')
  })

  test('transfer mail: one of concurrent mail jobs of a link takes its transfers', async () => {
    const now = clock.now()
    const eventId = await upsertEvent(
      database.handle().db,
      { uid: 'contract-ev', name: 'Contract', timezone: 'UTC' },
      now,
    )
    const partnerId = await partnerNamed(database.handle().db, eventId, 'Contract partner', now)
    await insertTicketType(database.handle().db, {
      uid: 'contract-tt',
      event_id: eventId,
      name: 'Day',
      price: 10,
      ticket_date: '2026-07-01',
      created_at: now,
    })
    const type = await findTicketType(database.handle().db, eventId, 'contract-tt')
    assert.ok(type)
    const linkId = await openLink(database.handle().db, eventId, 'holder@example.com', now)
    for (const n of [1, 2, 3]) {
      await database
        .handle()
        .db.transaction()
        .execute(async (tx) =>
          issueTransfer(tx, {
            uid: `contract-t${n}`,
            event_id: eventId,
            ticket_type_id: type.id,
            company_ticket_id: `C-${n}`,
            email: 'holder@example.com',
            balance: 0,
            promo_balance: 0,
            access_gate: null,
            seat_number: null,
            link_id: linkId,
            created_at: now,
            code_body: `body-${n}`,
            code_digest: `digest-${n}`,
            partner_id: partnerId,
          }),
        )
    }
    const taken = await race((i) =>
      takeTransfersToMail(database.handle().db, linkId, `claim-${i}`, clock.now(), async () => {}),
    )
    const winners = taken.filter((t) => t !== null)
    assert.equal(winners.length, 1)
    assert.equal(winners[0]!.ids.length, 3, 'the winner takes every transfer of the link')
  })

  test('job lease: concurrent runners run each due job exactly once', async () => {
    const log = pino({ level: 'silent' })
    const ran = new Map<number, number>()
    const runners = Array.from({ length: 4 }, () => {
      const r = new JobRunner({
        db: database.handle().db,
        dialect: database.handle().dialect,
        clock,
        log,
        pollMs: 60_000,
        leaseMs: 60_000,
      })
      r.register('contract', {
        retrySchedule: [],
        run: async (p: { n: number }) => void ran.set(p.n, (ran.get(p.n) ?? 0) + 1),
      })
      return r
    })
    for (let n = 0; n < 40; n++)
      await enqueue(database.handle().db, clock.now(), { kind: 'contract', payload: { n } })
    // Each runner claims until nothing is due; a job leased by one is not due to the others.
    await Promise.all(
      runners.map(async (r) => {
        while ((await r.runDue()) > 0);
      }),
    )
    assert.equal(ran.size, 40)
    assert.deepEqual([...new Set(ran.values())], [1], 'a job ran more than once')
  })
})
