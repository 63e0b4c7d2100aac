import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { Agent, request } from 'undici'
import { nextAddress, PRODUCTION_ENV, STANDARD_SEED, TEST_SECRET } from '../../test/helpers/app.js'
import { eachBackend, httpBackends, type ProvisionedBackend } from '../../test/helpers/backends.js'
import { wristband } from '../../test/helpers/cli.js'
import { freePort } from '../../test/helpers/processes.js'
import { type Receiver, startReceiver } from '../../test/helpers/receiver.js'
import { ServiceProcess } from '../../test/helpers/service.js'
import { until } from '../../test/helpers/until.js'
import { createApiKey } from '../api-keys/api-keys.store.js'
import { type DatabaseHandle, openDatabase } from '../platform/db/database.js'

/**
 * The service killed with SIGKILL in the middle of a burst of transfers and ticket uses, then started
 * again. The normal suite runs a short burst with one kill; `RELIABILITY_FULL=1` runs the long one:
 *   RELIABILITY_FULL=1 TEST_DATABASE_URL=postgres://… node scripts/test.mjs reliability/sigkill
 */
const FULL = process.env.RELIABILITY_FULL === '1'
const REQUESTS = FULL ? 2000 : 40
const KILLS = FULL ? 5 : 1
const CONCURRENCY = FULL ? 32 : 8
const EVENT_UID = 'summer-fest-2026'
/** The job runner's lease (platform/jobs): a job claimed by a process that died waits this long. */
const JOB_LEASE_MS = 60_000

type Op =
  | { kind: 'transfer'; companyTicketId: string; email: string }
  | { kind: 'use'; companyTicketId: string; transferUid: string }

interface Outcome {
  op: Op
  /** HTTP status, or undefined when no answer came (the connection was cut or refused). */
  status?: number
  body?: Record<string, unknown>
  error?: string
}

interface Answer {
  status: number
  body: Record<string, unknown>
}

eachBackend(httpBackends, 'SIGKILL during a burst', (backend) => {
  let p: ProvisionedBackend
  let service: ServiceProcess
  let receiver: Receiver
  let handle: DatabaseHandle
  const agent = new Agent({ connections: CONCURRENCY * 2 })

  async function call(
    method: 'GET' | 'POST' | 'PUT',
    path: string,
    opts: { body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<Answer> {
    const res = await request(`${service.origin}${path}`, {
      method,
      dispatcher: agent,
      headers: {
        'x-forwarded-for': nextAddress(),
        ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...opts.headers,
      },
      ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
    })
    const text = await res.body.text()
    return { status: res.statusCode, body: text ? JSON.parse(text) : {} }
  }

  before(async () => {
    p = await backend.provision()
    const env = {
      ...p.env,
      JWT_SECRET: TEST_SECRET,
      WEBHOOK_ALLOW_PRIVATE: 'true',
      JOBS_POLL_MS: '50',
      LOG_LEVEL: 'warn',
      ...PRODUCTION_ENV,
    }
    const seeded = await wristband(['seed', '-'], env, JSON.stringify(STANDARD_SEED))
    assert.equal(seeded.code, 0, seeded.stderr)
    handle = await openDatabase(p.env.DATABASE_URL!, { schema: p.env.DATABASE_SCHEMA ?? 'public' })
    receiver = await startReceiver()
    service = new ServiceProcess(await freePort(), env, p.env.DATA_DIR!)
    await service.start()
  })
  after(async () => {
    await service?.kill()
    await agent.close()
    await receiver?.close()
    await handle?.close()
    await p?.dispose()
  })

  test(`${REQUESTS} concurrent transfers and uses, ${KILLS} SIGKILL(s): every 2xx stored, nothing applied twice, one notification per used ticket`, {
    timeout: FULL ? 30 * 60_000 : 120_000,
  }, async () => {
    const apiKey = (
      await createApiKey(handle.db, {
        event_id: 1,
        name: 'sigkill',
        scopes: ['api:read', 'api:write'],
        created_by: null,
        now: Date.now(),
      })
    ).plaintext
    const partner = { api_key: apiKey }
    const hook = await call('PUT', '/companies/webhook', { headers: partner, body: { url: receiver.url } })
    assert.equal(hook.status, 200, JSON.stringify(hook.body))
    const type = await call('POST', '/companies/ticket', {
      headers: partner,
      body: { event_uid: EVENT_UID, name: 'Day pass', price: 49.9, ticket_date: '2026-07-18T12:00:00.000' },
    })
    assert.equal(type.status, 201, JSON.stringify(type.body))
    const ticketUid = String(type.body.ticket_uid)
    const signIn = await call('POST', '/auth/login', {
      body: { email: 'op@example.com', password: 's3cret-pass', role: 'operator' },
    })
    assert.equal(signIn.status, 200, JSON.stringify(signIn.body))
    const scanner = { authorization: `Bearer ${signIn.body.access_token}` }

    const transferBody = (companyTicketId: string, email: string) => ({
      event_uid: EVENT_UID,
      email,
      ticket_uid: ticketUid,
      company_ticket_id: companyTicketId,
    })
    const send = (op: Op) =>
      op.kind === 'transfer'
        ? call('POST', '/companies/transfer', {
            headers: partner,
            body: transferBody(op.companyTicketId, op.email),
          })
        : call('POST', `/tickets/${op.transferUid}/use`, { headers: scanner, body: {} })

    // The tickets the burst uses exist beforehand; the burst creates as many new ones.
    const half = REQUESTS / 2
    const ops: Op[] = []
    await pool(
      Array.from({ length: half }, (_, i) => i),
      CONCURRENCY,
      async (i) => {
        const companyTicketId = `pre-${i}`
        const res = await call('POST', '/companies/transfer', {
          headers: partner,
          body: transferBody(companyTicketId, `pre${i}@example.com`),
        })
        assert.equal(res.status, 201, JSON.stringify(res.body))
        ops.push({ kind: 'use', companyTicketId, transferUid: String(res.body.transfer_uid) })
      },
    )
    for (let i = 0; i < half; i++)
      ops.push({ kind: 'transfer', companyTicketId: `burst-${i}`, email: `burst${i}@example.com` })
    shuffle(ops)

    // The burst: workers take the next request while the service is up; at each threshold of
    // finished requests the service is SIGKILLed with requests in flight, then started again.
    const killAt = Array.from({ length: KILLS }, (_, k) => Math.floor((REQUESTS * (k + 1)) / (KILLS + 2)))
    const outcomes: Outcome[] = []
    let up: Promise<void> = Promise.resolve()
    let lastKill = 0
    let finished = 0
    const killAndRestart = () => {
      up = (async () => {
        lastKill = Date.now()
        await service.kill()
        await service.start()
      })()
    }
    const queue = [...ops]
    await pool(Array.from({ length: CONCURRENCY }), CONCURRENCY, async () => {
      for (;;) {
        await up
        const op = queue.shift()
        if (!op) return
        try {
          outcomes.push({ op, ...(await send(op)) })
        } catch (err) {
          outcomes.push({ op, error: String((err as { code?: string }).code ?? err) })
        }
        finished++
        if (killAt.length && finished >= killAt[0]!) {
          killAt.shift()
          killAndRestart()
        }
      }
    })
    await up

    const answered = outcomes.filter((o) => o.status !== undefined)
    const cut = outcomes.filter((o) => o.status === undefined)
    assert.equal(outcomes.length, REQUESTS)
    assert.ok(cut.length > 0, 'the kill cut requests in flight')
    assert.ok(answered.length > cut.length, 'most requests were answered')
    for (const o of answered)
      assert.ok(
        (o.op.kind === 'transfer' && o.status === 201) || (o.op.kind === 'use' && o.status === 200),
        `${o.op.kind} ${o.op.companyTicketId}: ${o.status} ${JSON.stringify(o.body)}`,
      )

    // Every request that got a 2xx is stored; its retry is a 409. A request whose answer was lost
    // was applied or not: its retry settles it, and afterwards it is stored once.
    await pool(outcomes, CONCURRENCY, async (o) => {
      const id = o.op.companyTicketId
      const stored = async () => {
        const res = await call('GET', `/companies/transfer/${id}`, { headers: partner })
        assert.equal(res.status, 200, `${id} is stored: ${JSON.stringify(res.body)}`)
        return res.body
      }
      if (o.op.kind === 'transfer') {
        const retry = await send(o.op)
        if (o.status === 201) {
          assert.equal((await stored()).transfer_uid, o.body!.transfer_uid, id)
          assert.equal(retry.status, 409, `retry of ${id}: ${JSON.stringify(retry.body)}`)
          assert.equal(retry.body.error, 'duplicate_company_ticket_id')
        } else {
          assert.ok([201, 409].includes(retry.status), `retry of lost ${id}: ${retry.status}`)
          await stored()
        }
      } else {
        const retry = await send(o.op)
        if (o.status === 200) {
          const t = await stored()
          assert.equal(t.status, 'USED', id)
          assert.equal(t.used_timestamp, o.body!.used_timestamp, id)
          assert.equal(retry.status, 409, `retry of use ${id}: ${JSON.stringify(retry.body)}`)
          assert.equal(retry.body.used_timestamp, o.body!.used_timestamp)
        } else {
          assert.ok([200, 409].includes(retry.status), `retry of lost use ${id}: ${retry.status}`)
          assert.equal((await stored()).status, 'USED', id)
        }
      }
    })

    // Nothing applied twice.
    const { db } = handle
    const transfers = await db
      .selectFrom('transfers')
      .select(['id', 'uid', 'company_ticket_id', 'status'])
      .where('event_id', '=', 1)
      .execute()
    assert.equal(transfers.length, REQUESTS, 'one row per company_ticket_id, no more')
    assert.equal(new Set(transfers.map((t) => t.company_ticket_id)).size, REQUESTS)
    const used = transfers.filter((t) => t.status === 'USED')
    assert.deepEqual(
      used.map((t) => t.company_ticket_id).sort(),
      ops
        .filter((o) => o.kind === 'use')
        .map((o) => o.companyTicketId)
        .sort(),
      'exactly the used tickets are USED',
    )

    // Each USED ticket has exactly one notification, delivered. Jobs the killed process had claimed
    // are picked up when their lease runs out; the short run skips that wait by ending the leases
    // that only the dead processes can hold (taken before the last restart).
    if (!FULL)
      await db
        .updateTable('jobs')
        .set({ locked_until: null })
        .where('done_at', 'is', null)
        .where('locked_until', '<=', lastKill + JOB_LEASE_MS)
        .execute()
    await until(
      'every notification delivered',
      async () => {
        const pending = await db
          .selectFrom('webhook_deliveries')
          .select('id')
          .where('status', '<>', 'delivered')
          .execute()
        return pending.length === 0
      },
      FULL ? 3 * JOB_LEASE_MS : 20_000,
    )
    const deliveries = await listDeliveries(call, partner)
    assert.equal(deliveries.length, used.length, 'one notification per used ticket')
    const byTransfer = new Map(deliveries.map((d) => [String(d.payload.transfer_uid), d]))
    const seen = new Map<string, Set<string>>()
    for (const r of receiver.log) {
      const uid = String(JSON.parse(r.body).transfer_uid)
      if (!seen.has(uid)) seen.set(uid, new Set())
      seen.get(uid)!.add(String(r.headers['webhook-id']))
    }
    assert.equal(seen.size, used.length, 'the receiver heard of exactly the used tickets')
    for (const t of used) {
      const d = byTransfer.get(t.uid)
      assert.ok(d, `a notification for ${t.company_ticket_id}`)
      assert.equal(d.status, 'delivered', t.company_ticket_id)
      assert.deepEqual(
        [...(seen.get(t.uid) ?? [])],
        [d.webhook_id],
        `one webhook-id for ${t.company_ticket_id}`,
      )
    }
    const repeats = receiver.log.length - used.length
    console.log(
      `[${backend.name}] ${REQUESTS} requests, ${KILLS} kill(s): ${answered.length} answered, ${cut.length} cut; ` +
        `${used.length} used tickets notified; ${repeats} repeated deliveries (same webhook-id)`,
    )
  })
})

interface DeliveryView {
  webhook_id: string
  status: string
  payload: Record<string, unknown>
}

/** Every delivery in the partner's listing, page by page (newest first). */
async function listDeliveries(
  call: (method: 'GET', path: string, opts: { headers: Record<string, string> }) => Promise<Answer>,
  headers: Record<string, string>,
): Promise<(DeliveryView & { id: number })[]> {
  const all: (DeliveryView & { id: number })[] = []
  let before = ''
  for (;;) {
    const res = await call('GET', `/companies/webhook/deliveries?limit=200${before}`, { headers })
    assert.equal(res.status, 200, JSON.stringify(res.body))
    const page = res.body.deliveries as (DeliveryView & { id: number })[]
    all.push(...page)
    if (page.length < 200) return all
    before = `&before=${page.at(-1)!.id}`
  }
}

/** Runs `fn` over `items` with at most `limit` at once. */
async function pool<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!)
    }),
  )
}

function shuffle<T>(list: T[]): void {
  for (let i = list.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[list[i], list[j]] = [list[j]!, list[i]!]
  }
}
