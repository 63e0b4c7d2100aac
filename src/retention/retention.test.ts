import assert from 'node:assert/strict'
import { before, test } from 'node:test'
import { forEachBackend, STANDARD_SEED, type TestApp } from '../../test/helpers/app.js'
import { httpBackends } from '../../test/helpers/backends.js'
import { sample } from '../../test/helpers/scrape.js'
import { until } from '../../test/helpers/until.js'
import { claimLink } from '../holder/holder.store.js'
import { BATCHES_PER_RUN, RETENTION_BATCH, RETENTION_INTERVAL_MS } from './retention.js'

const DAY = 86_400_000
const METRICS_TOKEN = 'scrape-token-0123456789abcdef'

/**
 * The retention job deletes what has served its time, in batches, and nothing else: old finished
 * jobs and deliveries (with their attempts), old audit rows, expired revocations and refresh tokens,
 * old tokens of claimed links. Pending deliveries, unclaimed links and everything recent stay, and
 * the delivery counters (migration 019) follow the deletions.
 */
forEachBackend(
  httpBackends,
  'retention',
  (ctx) => {
    let t: TestApp
    before(async () => {
      t = ctx()
      await t.seed(STANDARD_SEED)
    })

    const count = async (
      table:
        | 'audit_log'
        | 'revoked_tokens'
        | 'refresh_tokens'
        | 'jobs'
        | 'webhook_deliveries'
        | 'webhook_attempts'
        | 'holder_link_tokens',
    ) => {
      const r = await t.db.db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow()
      return Number(r.n)
    }

    test('old rows go in batches at the next run, recent and pending ones stay', async () => {
      const db = t.db.db
      const now = t.clock.now()
      const oldAudit = RETENTION_BATCH * 2 + 34
      const auditBefore = await count('audit_log')
      for (let i = 0; i < oldAudit; i += 500)
        await db
          .insertInto('audit_log')
          .values(
            Array.from({ length: Math.min(500, oldAudit - i) }, () => ({
              at: now - 366 * DAY,
              kind: 'old_entry',
              outcome: 'success',
            })),
          )
          .execute()
      await db
        .insertInto('audit_log')
        .values({ at: now - 364 * DAY, kind: 'kept_entry', outcome: 'success' })
        .execute()

      await db
        .insertInto('revoked_tokens')
        .values([
          { jti: 'expired-revocation', expires_at: now - 1, revoked_at: now - DAY },
          { jti: 'live-revocation', expires_at: now + DAY, revoked_at: now - DAY },
        ])
        .execute()
      const refresh = (jti: string, expires_at: number) => ({
        jti,
        family_id: `family-${jti}`,
        subject_kind: 'admin',
        subject_id: 1,
        expires_at,
        created_at: now - 40 * DAY,
      })
      await db
        .insertInto('refresh_tokens')
        .values([refresh('expired-refresh', now - 1), refresh('live-refresh', now + DAY)])
        .execute()

      const job = (kind: string, done_at: number | null, failed_at: number | null) => ({
        kind,
        payload: '{}',
        run_at: now - 100 * DAY,
        created_at: now - 100 * DAY,
        done_at,
        failed_at,
      })
      await db
        .insertInto('jobs')
        .values([
          job('old-done', now - 91 * DAY, null),
          job('old-failed', null, now - 91 * DAY),
          job('recent-done', now - 89 * DAY, null),
        ])
        .execute()

      const delivery = async (uid: string, status: string, created_at: number) => {
        const r = await db
          .insertInto('webhook_deliveries')
          .values({ uid, event_id: 1, payload: '{}', status, attempts: 1, created_at })
          .returning('id')
          .executeTakeFirstOrThrow()
        await db
          .insertInto('webhook_attempts')
          .values({
            delivery_id: r.id,
            attempted_at: created_at,
            url: 'https://example.com/',
            status_code: 200,
            duration_ms: 5,
          })
          .execute()
      }
      await delivery('old-delivered', 'delivered', now - 91 * DAY)
      await delivery('old-failed', 'failed', now - 91 * DAY)
      await delivery('old-pending', 'pending', now - 91 * DAY)
      await delivery('recent-delivered', 'delivered', now - 89 * DAY)

      // Links made 91 days ago, claimed (through the store's own claim) 90 days ago, 10 days ago or never.
      const customer = await db.selectFrom('customers').select('id').executeTakeFirstOrThrow()
      const link = async (email: string, claimedDaysAgo?: number) => {
        const r = await db
          .insertInto('holder_links')
          .values({ event_id: 1, email, created_at: now - 91 * DAY, updated_at: now - 91 * DAY })
          .returning('id')
          .executeTakeFirstOrThrow()
        await db
          .insertInto('holder_link_tokens')
          .values({ token_hash: `hash-${email}`, link_id: r.id, created_at: now - 91 * DAY })
          .execute()
        if (claimedDaysAgo !== undefined)
          assert.ok(
            await db
              .transaction()
              .execute((tx) => claimLink(tx, r.id, 1, customer.id, now - claimedDaysAgo * DAY)),
          )
      }
      await link('claimed@example.com', 90)
      await link('claimed-lately@example.com', 10)
      await link('unclaimed@example.com')

      const deliveriesBefore = await count('webhook_deliveries')
      const attemptsBefore = await count('webhook_attempts')
      // The next hourly run is due.
      t.clock.advance(RETENTION_INTERVAL_MS + 1)
      await until('the old audit rows gone', async () => (await count('audit_log')) <= auditBefore + 1)

      assert.equal(
        await count('audit_log'),
        auditBefore + 1,
        'every old row in several batches, the kept one stays',
      )
      const jtis = async (table: 'revoked_tokens' | 'refresh_tokens') =>
        (await db.selectFrom(table).select('jti').execute()).map((r) => r.jti)
      assert.ok(!(await jtis('revoked_tokens')).includes('expired-revocation'))
      assert.ok((await jtis('revoked_tokens')).includes('live-revocation'))
      assert.ok(!(await jtis('refresh_tokens')).includes('expired-refresh'))
      assert.ok((await jtis('refresh_tokens')).includes('live-refresh'))
      const kinds = (await db.selectFrom('jobs').select('kind').execute()).map((r) => r.kind)
      assert.ok(!kinds.includes('old-done') && !kinds.includes('old-failed'), kinds.join())
      assert.ok(kinds.includes('recent-done'))
      const uids = (await db.selectFrom('webhook_deliveries').select('uid').execute()).map((r) => r.uid)
      assert.deepEqual(
        ['old-delivered', 'old-failed', 'old-pending', 'recent-delivered'].filter((u) => uids.includes(u)),
        ['old-pending', 'recent-delivered'],
      )
      assert.equal(await count('webhook_deliveries'), deliveriesBefore - 2)
      assert.equal(await count('webhook_attempts'), attemptsBefore - 2, 'their attempts with them')
      const tokens = (await db.selectFrom('holder_link_tokens').select('token_hash').execute()).map(
        (r) => r.token_hash,
      )
      assert.ok(!tokens.includes('hash-claimed@example.com'))
      assert.ok(tokens.includes('hash-claimed-lately@example.com'), 'kept RETENTION_DAYS after the claim')
      assert.ok(tokens.includes('hash-unclaimed@example.com'))

      // The delivery counters followed the deletions.
      const counters = await db
        .selectFrom('delivery_counts')
        .select(['status', 'tried', 'n'])
        .where('event_id', '=', 1)
        .execute()
      const rows = await db
        .selectFrom('webhook_deliveries')
        .select(['status', 'attempts'])
        .where('event_id', '=', 1)
        .execute()
      for (const c of counters)
        assert.equal(
          Number(c.n),
          rows.filter((r) => r.status === c.status && (r.attempts === 0 ? 0 : 1) === c.tried).length,
          `${c.status}/${c.tried}`,
        )
      // And the next run is queued an hour on.
      const next = await db
        .selectFrom('jobs')
        .select('run_at')
        .where('kind', '=', 'retention')
        .where('done_at', 'is', null)
        .executeTakeFirstOrThrow()
      assert.ok(Number(next.run_at) > t.clock.now(), 'the next run is later')
    })

    test('a drain longer than a run goes on where it stopped; a row due behind it goes at the next drain', async () => {
      const db = t.db.db
      const now = t.clock.now()
      const runs = () =>
        db
          .selectFrom('jobs')
          .select(['id', 'payload', 'run_at', 'done_at'])
          .where('kind', '=', 'retention')
          .orderBy('id')
          .execute()
      // The drain: the run queued an hour on by the last one, and those it queues.
      const queuedRun = (await runs()).find((r) => r.done_at === null)!.id
      // More old audit rows than a run deletes, a millisecond apart.
      const backlog = RETENTION_BATCH * BATCHES_PER_RUN + RETENTION_BATCH + 1
      for (let i = 0; i < backlog; i += 500)
        await db
          .insertInto('audit_log')
          .values(
            Array.from({ length: Math.min(500, backlog - i) }, (_, k) => ({
              at: now - 400 * DAY + i + k,
              kind: 'backlog_entry',
              outcome: 'success',
            })),
          )
          .execute()
      // An old delivery still pending, and more than a batch of finished ones created after it: the
      // drain's cursor passes the pending one.
      await db
        .insertInto('webhook_deliveries')
        .values({
          uid: 'pending-behind',
          event_id: 1,
          payload: '{}',
          status: 'pending',
          attempts: 1,
          created_at: now - 95 * DAY,
        })
        .execute()
      await db
        .insertInto('webhook_deliveries')
        .values(
          Array.from({ length: RETENTION_BATCH + 1 }, (_, k) => ({
            uid: `delivered-after-${k}`,
            event_id: 1,
            payload: '{}',
            status: 'delivered',
            attempts: 1,
            created_at: now - 94 * DAY + k,
          })),
        )
        .execute()
      const backlogLeft = async () =>
        Number(
          (
            await db
              .selectFrom('audit_log')
              .select((eb) => eb.fn.countAll().as('n'))
              .where('kind', '=', 'backlog_entry')
              .executeTakeFirstOrThrow()
          ).n,
        )
      const uids = async () =>
        (
          await db
            .selectFrom('webhook_deliveries')
            .select('uid')
            .where('created_at', '<', now - 93 * DAY)
            .execute()
        ).map((r) => r.uid)

      t.clock.advance(RETENTION_INTERVAL_MS + 1)
      // Two runs: the second queued at once, then the next drain an hour on.
      await until('the backlog drained and the next drain queued', async () => {
        const queued = (await runs()).filter((r) => r.id > queuedRun && r.done_at === null)
        return (await backlogLeft()) === 0 && queued.length === 1 && Number(queued[0]!.run_at) > t.clock.now()
      })
      const drain = (await runs()).filter((r) => r.id >= queuedRun)
      assert.equal(drain.length, 3, 'two runs and the next one queued')
      const [first, second, next] = drain.map((r) => JSON.parse(r.payload))
      assert.deepEqual(first, {})
      // The second run starts where the first stopped: the audit log past the rows it deleted; the
      // deliveries, drained, are left alone.
      assert.deepEqual(Object.keys(second.drain.cursors), ['audit_log'], JSON.stringify(second))
      assert.equal(
        second.drain.cursors.audit_log[0],
        now - 400 * DAY + RETENTION_BATCH * BATCHES_PER_RUN - 1,
        JSON.stringify(second),
      )
      assert.ok(second.drain.drained.includes('webhook_deliveries'), JSON.stringify(second))
      assert.deepEqual(next, {}, 'the next drain starts at the beginning')
      assert.deepEqual(await uids(), ['pending-behind'], 'every finished one, past the pending one')

      // The pending delivery is delivered: it is due, behind where the drain went. The next drain takes it.
      await db
        .updateTable('webhook_deliveries')
        .set({ status: 'delivered' })
        .where('uid', '=', 'pending-behind')
        .execute()
      t.clock.advance(RETENTION_INTERVAL_MS + 1)
      await until('the delivery due behind the cursor gone', async () => (await uids()).length === 0)
    })
  },
  { JOBS_POLL_MS: '20' },
)

/**
 * `wristband_retention_lag_seconds`, through a scrape: 0 while the next run is ahead; how long a due run
 * has waited when no runner takes it (here: held by a runner that hangs); after the last run failed for
 * good and nothing is queued, the time since that failure. The alert "retention lag" reads it.
 */
forEachBackend(
  httpBackends,
  'retention lag metric',
  (ctx) => {
    let t: TestApp
    before(() => {
      t = ctx()
    })
    const HOUR = 3_600_000
    const lag = async () => {
      const res = await t.request({ method: 'GET', url: '/metrics', token: METRICS_TOKEN })
      assert.equal(res.statusCode, 200)
      return sample(res.body, 'wristband_retention_lag_seconds')
    }
    const queued = () =>
      t.db.db
        .updateTable('jobs')
        .where('dedupe_key', '=', 'retention')
        .where('done_at', 'is', null)
        .where('failed_at', 'is', null)

    test('0 while the next run is ahead, then how late a due run is, then the time since a final failure', async () => {
      // The run queued at start has run and queued the next one an hour on.
      await until('the first retention run queued the next', async () => {
        const row = await t.db.db
          .selectFrom('jobs')
          .select('run_at')
          .where('dedupe_key', '=', 'retention')
          .where('done_at', 'is', null)
          .executeTakeFirst()
        return row !== undefined && Number(row.run_at) > t.clock.now()
      })
      assert.equal(await lag(), 0)

      t.clock.freeze()
      try {
        const now = t.clock.now()
        await queued()
          .set({ run_at: now - 3 * HOUR, locked_until: now + 10 * HOUR })
          .execute()
        assert.equal(await lag(), 3 * 3600, 'due three hours ago, held by a runner that hangs')

        await queued()
          .set({ failed_at: now - 2 * HOUR, dedupe_key: null, locked_until: null, last_error: 'boom' })
          .execute()
        assert.equal(await lag(), 2 * 3600, 'failed for good two hours ago, nothing queued')
      } finally {
        t.clock.thaw()
      }
    })
  },
  { JOBS_POLL_MS: '20', METRICS_TOKEN },
)
