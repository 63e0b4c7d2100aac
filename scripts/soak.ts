// Soak test: two instances of the real service (child processes on their own ports) sharing one
// PostgreSQL schema and one Redis prefix, under verify, login, refresh, transfer and ticket use at
// once for SOAK_SECONDS. Reports counts, errors, p99 latencies and the memory of each instance;
// exits non-zero on any error other than 429 or when memory keeps growing. Loopback only.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test TEST_REDIS_URL=redis://127.0.0.1:6379 \
//     SOAK_SECONDS=60 npm run soak
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Redis } from 'ioredis'
import pg from 'pg'
import { Agent, request } from 'undici'
import { createApiKey } from '../src/api-keys/api-keys.store.js'
import { openDatabase } from '../src/platform/db/database.js'
import { wristband } from '../test/helpers/cli.js'
import { freePort } from '../test/helpers/processes.js'
import { ServiceProcess } from '../test/helpers/service.js'

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60)
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 32)
const ADDRESSES = 5000
const SAMPLE_MS = 5000
/**
 * Memory has levelled off when the floor (lowest sample) of RSS and of the V8 heap in use in the last
 * third of the run is at most this share above the floor in the middle third (the first third is
 * warm-up: code is compiled, pools fill). Floors, because between two major collections the heap
 * climbs by a hundred megabytes or more and falls back: what a leak raises is the level it falls to.
 */
const LEVEL_SHARE = 0.1
/** ...or at most this many bytes, whichever is more: a 50 MB heap floor moves by a few MB from sample to sample. */
const LEVEL_SLACK = 16 * 2 ** 20
const SECRET = randomBytes(32).toString('base64url')
const METRICS_TOKEN = randomBytes(18).toString('base64url')
const PASSWORD = 's3cret-pass'
const EVENT_UID = 'soak-fest'
const ACCOUNTS = 20

const dbUrl = process.env.TEST_DATABASE_URL
const redisUrl = process.env.TEST_REDIS_URL
if (!dbUrl || !redisUrl) {
  console.error(
    'soak: set TEST_DATABASE_URL (PostgreSQL) and TEST_REDIS_URL (Redis); both are shared by the two instances',
  )
  process.exit(2)
}
for (const u of [dbUrl, redisUrl]) {
  const host = new URL(u).hostname
  if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(host)) {
    console.error(`soak: loopback only, refusing ${host}`)
    process.exit(2)
  }
}
// Under a minute the first two thirds are still warm-up, and the memory verdict would mean nothing.
if (!Number.isInteger(SECONDS) || SECONDS < 60 || SECONDS > 3600) {
  console.error('soak: SOAK_SECONDS must be a whole number from 60 to 3600')
  process.exit(2)
}

type Kind = 'verify' | 'login' | 'refresh' | 'transfer' | 'use'
const KINDS: Kind[] = ['verify', 'login', 'refresh', 'transfer', 'use']
/** Share of each kind in the mix (uses fall back to transfers while no fresh ticket is waiting). */
const MIX: [Kind, number][] = [
  ['verify', 0.4],
  ['login', 0.08],
  ['refresh', 0.14],
  ['transfer', 0.2],
  ['use', 0.18],
]

const tag = randomBytes(5).toString('hex')
const schema = `wbsoak_${tag}`
const prefix = `wbsoak:${tag}:`
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-soak-'))
const env = {
  DATA_DIR: dataDir,
  DATABASE_URL: dbUrl,
  DATABASE_SCHEMA: schema,
  REDIS_URL: redisUrl,
  REDIS_PREFIX: prefix,
  JWT_SECRET: SECRET,
  METRICS_TOKEN,
  LOG_LEVEL: 'warn',
  NODE_ENV: 'production',
  EDGE_SIGNING_KEY: generateKeyPairSync('ed25519')
    .privateKey.export({ format: 'pem', type: 'pkcs8' })
    .toString(),
  MAIL_TRANSPORT: 'outbox',
}
const instances: ServiceProcess[] = []
const agent = new Agent({ connections: CONCURRENCY })

async function cleanUp(): Promise<void> {
  await Promise.all(instances.map((i) => i.stop()))
  await agent.close()
  const client = new pg.Client({ connectionString: dbUrl })
  await client.connect()
  await client.query(`drop schema if exists ${schema} cascade`)
  await client.end()
  const redis = new Redis(redisUrl!, { lazyConnect: true })
  await redis.connect()
  let cursor = '0'
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    if (keys.length) await redis.del(...keys)
    cursor = next
  } while (cursor !== '0')
  redis.disconnect()
  fs.rmSync(dataDir, { recursive: true, force: true })
}

let address = 0
function nextAddress(): string {
  address = (address % ADDRESSES) + 1
  return `10.77.${address >> 8}.${address & 255}`
}

interface Answer {
  status: number
  body: Record<string, unknown>
  raw: string
}

async function call(
  origin: string,
  method: 'GET' | 'POST' | 'PUT',
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const res = await request(`${origin}${url}`, {
    method,
    dispatcher: agent,
    headers: {
      'x-forwarded-for': nextAddress(),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const raw = await res.body.text()
  const json = res.headers['content-type']?.toString().startsWith('application/json')
  return { status: res.statusCode, body: json && raw ? JSON.parse(raw) : {}, raw }
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!
}

const whole = (bytes: number | undefined) => (bytes === undefined ? '?' : (bytes / 2 ** 20).toFixed(0))
const mb = (bytes: number | undefined) => (bytes === undefined ? 'n/a' : `${(bytes / 2 ** 20).toFixed(0)} MB`)

async function main(): Promise<number> {
  const seed = {
    events: [{ id: 1, uid: EVENT_UID, name: 'Soak Fest', timezone: 'Europe/Berlin' }],
    administrators: Array.from({ length: ACCOUNTS }, (_, i) => ({
      email: `admin${i}@soak.example`,
      password: PASSWORD,
      role: 'admin',
      event_ids: [1],
    })),
    operators: [
      {
        email: 'scanner@soak.example',
        password: PASSWORD,
        event_id: 1,
        mode: 0,
        permissions: { '1': ['ticket:scan'] },
      },
    ],
  }
  const seeded = await wristband(['seed', '-'], env, JSON.stringify(seed))
  if (seeded.code !== 0) throw new Error(`seed failed: ${seeded.stderr}`)
  const handle = await openDatabase(dbUrl!, { schema })
  const apiKey = (
    await createApiKey(handle.db, {
      event_id: 1,
      name: 'soak',
      scopes: ['api:read', 'api:write'],
      created_by: null,
      now: Date.now(),
    })
  ).plaintext

  for (let i = 0; i < 2; i++) instances.push(new ServiceProcess(await freePort(), env, dataDir))
  await Promise.all(instances.map((i) => i.start()))
  const origins = instances.map((i) => i.origin)
  let turn = 0
  const origin = () => origins[turn++ % origins.length]!

  const partner = { api_key: apiKey }
  const type = await call(
    origin(),
    'POST',
    '/companies/ticket',
    {
      event_uid: EVENT_UID,
      name: 'Soak pass',
      price: 10,
      ticket_date: '2026-07-18T12:00:00.000',
    },
    partner,
  )
  if (type.status !== 201) throw new Error(`ticket type: ${type.status} ${JSON.stringify(type.body)}`)
  // The scanner signs in again halfway through each access token's life, as a device would.
  const scanner = { authorization: '' }
  const signInScanner = async () => {
    const r = await call(origin(), 'POST', '/auth/login', {
      email: 'scanner@soak.example',
      password: PASSWORD,
      role: 'operator',
    })
    if (r.status !== 200) throw new Error(`scanner login: ${r.status}`)
    scanner.authorization = `Bearer ${r.body.access_token}`
    return Number(r.body.expires_in)
  }
  const scannerRenewal = setInterval(
    () => void signInScanner().catch((err) => console.error(`soak: ${(err as Error).message}`)),
    ((await signInScanner()) * 1000) / 2,
  )

  // Tokens in circulation: refresh tokens are taken out while being rotated (never used twice).
  const accessTokens: string[] = []
  const refreshTokens: string[] = []
  const unused: string[] = []
  let transferSeq = 0
  for (let i = 0; i < ACCOUNTS; i++) {
    const r = await call(origin(), 'POST', '/auth/login', {
      email: `admin${i}@soak.example`,
      password: PASSWORD,
    })
    if (r.status !== 200) throw new Error(`login: ${r.status}`)
    accessTokens.push(String(r.body.access_token))
    refreshTokens.push(String(r.body.refresh_token))
  }

  const counts = Object.fromEntries(KINDS.map((k) => [k, { ok: 0, limited: 0, errors: 0 }]))
  const latencies = Object.fromEntries(KINDS.map((k) => [k, [] as number[]]))
  const errors: string[] = []
  let transfersCreated = 0
  let ticketsUsed = 0

  async function one(kind: Kind): Promise<void> {
    const at = origin()
    const started = performance.now()
    let res: Answer
    let ok = false
    switch (kind) {
      case 'verify': {
        const token = accessTokens[Math.floor(Math.random() * accessTokens.length)]!
        res = await call(at, 'POST', '/tokens/verify', { token })
        ok = res.status === 200 && res.body.valid === true
        break
      }
      case 'login': {
        const i = Math.floor(Math.random() * ACCOUNTS)
        res = await call(at, 'POST', '/auth/login', { email: `admin${i}@soak.example`, password: PASSWORD })
        ok = res.status === 200
        if (ok) {
          accessTokens[i] = String(res.body.access_token)
          refreshTokens.push(String(res.body.refresh_token))
        }
        break
      }
      case 'refresh': {
        const token = refreshTokens.shift()
        if (!token) return one('login')
        res = await call(at, 'POST', '/auth/refresh', { refresh_token: token })
        ok = res.status === 200
        if (ok) refreshTokens.push(String(res.body.refresh_token))
        else if (res.status === 429) refreshTokens.push(token)
        break
      }
      case 'transfer': {
        const n = ++transferSeq
        res = await call(
          at,
          'POST',
          '/companies/transfer',
          {
            event_uid: EVENT_UID,
            email: `holder${n % 500}@soak.example`,
            ticket_uid: type.body.ticket_uid,
            company_ticket_id: `soak-${n}`,
          },
          partner,
        )
        ok = res.status === 201
        if (ok) {
          transfersCreated++
          unused.push(String(res.body.transfer_uid))
        }
        break
      }
      case 'use': {
        const uid = unused.shift()
        if (!uid) return one('transfer')
        res = await call(at, 'POST', `/tickets/${uid}/use`, {}, scanner)
        ok = res.status === 200
        if (ok) ticketsUsed++
        else if (res.status === 429) unused.push(uid)
        break
      }
    }
    const c = counts[kind]!
    if (ok) {
      c.ok++
      latencies[kind]!.push(performance.now() - started)
    } else if (res.status === 429) c.limited++
    else {
      c.errors++
      if (errors.length < 20) errors.push(`${kind} at ${at}: ${res.status} ${JSON.stringify(res.body)}`)
    }
  }

  const pick = (): Kind => {
    let r = Math.random()
    for (const [k, share] of MIX) {
      r -= share
      if (r < 0) return k
    }
    return 'verify'
  }

  // RSS from /proc; the V8 heap in use from each instance's own /metrics, to tell a leak in the
  // program (heap keeps rising) from memory the allocator or V8 simply has not handed back.
  const heapUsed = async (origin: string) => {
    const res = await call(origin, 'GET', '/metrics', undefined, { authorization: `Bearer ${METRICS_TOKEN}` })
    const m = /^nodejs_heap_size_used_bytes (\d+)/m.exec(String(res.raw))
    return m ? Number(m[1]) : undefined
  }
  const samples: { t: number; rss: (number | undefined)[]; heap: (number | undefined)[] }[] = []
  const start = Date.now()
  const end = start + SECONDS * 1000
  const sample = async () => {
    const t = (Date.now() - start) / 1000
    const rss = instances.map((i) => i.rss())
    samples.push({ t, rss, heap: await Promise.all(origins.map(heapUsed)) })
  }
  await sample()
  const sampler = setInterval(() => void sample(), SAMPLE_MS)
  console.log(`soak: ${SECONDS} s, ${CONCURRENCY} concurrent requests, instances on ${origins.join(' and ')}`)
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < end) {
        const kind = pick()
        try {
          await one(kind)
        } catch (err) {
          counts[kind]!.errors++
          if (errors.length < 20) errors.push(`${kind}: ${(err as Error).message}`)
        }
      }
    }),
  )
  clearInterval(sampler)
  clearInterval(scannerRenewal)
  await sample()

  // What the service answered is what it stored.
  const stored = await handle.db
    .selectFrom('transfers')
    .select((eb) => [eb.fn.countAll<number>().as('n')])
    .executeTakeFirstOrThrow()
  const usedRows = await handle.db
    .selectFrom('transfers')
    .select((eb) => [eb.fn.countAll<number>().as('n')])
    .where('status', '=', 'USED')
    .executeTakeFirstOrThrow()
  await handle.close()
  const integrity = Number(stored.n) === transfersCreated && Number(usedRows.n) === ticketsUsed

  const rows = KINDS.map((k) => {
    const sorted = latencies[k]!.sort((a, b) => a - b)
    const c = counts[k]!
    return `| ${k} | ${c.ok} | ${c.limited} | ${c.errors} | ${percentile(sorted, 0.5).toFixed(1)} | ${percentile(sorted, 0.99).toFixed(1)} | ${(sorted.at(-1) ?? 0).toFixed(1)} |`
  })
  const total = KINDS.reduce((n, k) => n + counts[k]!.ok + counts[k]!.limited + counts[k]!.errors, 0)
  const totalErrors = KINDS.reduce((n, k) => n + counts[k]!.errors, 0)
  console.log(
    `\n${total} requests in ${SECONDS} s (${(total / SECONDS).toFixed(0)}/s), ${totalErrors} errors\n`,
  )
  console.log('| kind | 2xx | 429 | errors | p50 ms | p99 ms | max ms |')
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |')
  for (const r of rows) console.log(r)
  if (errors.length) console.log(`\nfirst errors:\n  ${errors.join('\n  ')}`)
  console.log(
    `\nstored: ${stored.n} transfers for ${transfersCreated} answered 201, ${usedRows.n} USED for ${ticketsUsed} answered 200${integrity ? '' : '  <-- MISMATCH'}`,
  )

  const mid = samples[Math.floor(samples.length / 2)]!
  const last = samples.at(-1)!
  const third = Math.floor(samples.length / 3)
  const floor = (list: typeof samples, i: number, what: 'rss' | 'heap') => {
    const v = list.map((s) => s[what][i]).filter((r): r is number => r !== undefined)
    return v.length ? Math.min(...v) : undefined
  }
  const within = (middle: number | undefined, lastOne: number | undefined) =>
    middle === undefined ||
    lastOne === undefined ||
    lastOne <= middle + Math.max(middle * LEVEL_SHARE, LEVEL_SLACK)
  let levelled = true
  console.log(
    '\n| instance | RSS start | RSS middle | RSS end | RSS floor, middle third | RSS floor, last third | heap floor, middle third | heap floor, last third | levelled off |',
  )
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |')
  instances.forEach((inst, i) => {
    const middle = samples.slice(third, 2 * third)
    const tail = samples.slice(2 * third)
    const [rssM, rssL] = [floor(middle, i, 'rss'), floor(tail, i, 'rss')]
    const [heapM, heapL] = [floor(middle, i, 'heap'), floor(tail, i, 'heap')]
    const ok = within(rssM, rssL) && within(heapM, heapL)
    levelled &&= ok
    console.log(
      `| ${inst.port} | ${mb(samples[0]!.rss[i])} | ${mb(mid.rss[i])} | ${mb(last.rss[i])} | ${mb(rssM)} | ${mb(rssL)} | ${mb(heapM)} | ${mb(heapL)} | ${ok ? 'yes' : 'NO'} |`,
    )
  })
  console.log(
    `\nRSS | heap used, every ${SAMPLE_MS / 1000} s (MB, one instance / the other): ${samples
      .map((s) => `${s.t.toFixed(0)}s ${s.rss.map(whole).join('/')} | ${s.heap.map(whole).join('/')}`)
      .join(', ')}`,
  )
  const failed = totalErrors > 0 || !integrity || !levelled
  console.log(failed ? '\nsoak: FAILED' : '\nsoak: passed')
  return failed ? 1 : 0
}

let code = 1
try {
  code = await main()
} catch (err) {
  console.error('soak:', err)
  for (const i of instances) if (i.output) console.error(`--- instance ${i.port} output ---\n${i.output}`)
} finally {
  await cleanUp()
}
process.exit(code)
