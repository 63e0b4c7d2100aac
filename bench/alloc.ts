/**
 * `node --max-semi-space-size=1 --import tsx bench/alloc.ts`: does a hit of the in-process rate limiter and of the token check
 * allocate? Runs each a few million times in this process (65,536 rotating addresses, 200 distinct
 * valid tokens, as `npm run bench` does) and counts the garbage collections V8 ran meanwhile, beside a
 * control that allocates nothing and one that reads the clock. With a young generation
 * of 1 MB (the flag above), every collection stands for about 1 MB allocated; a path that allocates
 * nothing triggers none. Measures and asserts nothing; prints a small table.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { PerformanceObserver } from 'node:perf_hooks'
import { systemClock } from '../src/platform/clock.js'
import { openDatabase } from '../src/platform/db/database.js'
import { memoryCounters } from '../src/platform/rate-limit.js'
import { JwtCodec } from '../src/tokens/jwt.js'
import { memoryRevocations } from '../src/tokens/revocations.js'
import { insertRevocations } from '../src/tokens/revocations.store.js'
import { TokenService } from '../src/tokens/token.service.js'

const CALLS = 3_000_000
const ADDRESSES = 65_536
const TOKENS = 200

let collections = 0
const observer = new PerformanceObserver((list) => {
  collections += list.getEntries().length
})
observer.observe({ entryTypes: ['gc'] })

/** Collections and heap growth over `CALLS` calls of `fn` (after a warm-up that fills every cache). */
async function measure(name: string, fn: (i: number) => unknown): Promise<string> {
  for (let i = 0; i < 300_000; i++) fn(i)
  await new Promise((r) => setTimeout(r, 50))
  const before = collections
  const heap = process.memoryUsage().heapUsed
  const started = process.hrtime.bigint()
  let sink = 0
  for (let i = 0; i < CALLS; i++) if (fn(i)) sink++
  const ns = Number(process.hrtime.bigint() - started)
  await new Promise((r) => setTimeout(r, 50))
  const grown = (process.memoryUsage().heapUsed - heap) / 1024
  return `| ${name} | ${CALLS.toLocaleString('en')} | ${collections - before} | ${grown.toFixed(0)} KB | ${(ns / CALLS).toFixed(0)} ns | ${sink > 0 ? '' : '-'}`
}

const addresses = Array.from(
  { length: ADDRESSES },
  (_, k) => `10.${(k >> 16) & 255}.${(k >> 8) & 255}.${k & 255}`,
)
const limiter = memoryCounters(systemClock)
const jwt = new JwtCodec({
  secret: 'bench-secret-that-is-at-least-32-bytes-long!',
  previousSecrets: [],
  audience: 'wristband',
  issuer: 'wristband',
  clock: systemClock,
})
const tokens = Array.from(
  { length: TOKENS },
  (_, i) => jwt.issue({ type: 'access', sub: String(i), role: 'admin' }, 3600).token,
)
// introspect never reaches the database for a JWT once the list is loaded; its arrays answer (100,000
// revocations on a SQLite file, so a look-up digests the jti and bisects them as in production).
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-alloc-'))
const handle = await openDatabase(`sqlite:${path.join(dir, 'alloc.db')}`)
await handle.migrate()
for (let i = 0; i < 100_000; i += 1000)
  await insertRevocations(
    handle.db,
    Date.now(),
    Array.from({ length: 1000 }, (_, k) => ({ jti: `revoked-${i + k}`, expiresAt: Date.now() + 3_600_000 })),
  )
const revocations = memoryRevocations({ db: handle.db, clock: systemClock })
await revocations.start()
while (!revocations.freshness().fresh) await new Promise((r) => setTimeout(r, 20))
const service = new TokenService({
  db: undefined as never,
  jwt,
  revocations,
  clock: systemClock,
  audit: undefined as never,
  config: { ACCESS_TOKEN_EXPIRE_MINUTES: 15, REFRESH_TOKEN_EXPIRE_DAYS: 30, OFFLINE_TOKEN_EXPIRE_HOURS: 72 },
})

const rows = [
  await measure('control: nothing', (i) => i >= 0),
  // A timestamp beyond the small-integer range comes back boxed: 16 bytes per call, whoever reads it.
  await measure('control: Date.now()', () => systemClock.now() > 0),
  await measure('rate limiter hit, 65,536 rotating addresses', (i) =>
    limiter.hit(addresses[i & (ADDRESSES - 1)]!, 60_000),
  ),
  await measure('token check (JwtCodec.tryVerify), 200 tokens', (i) => jwt.tryVerify(tokens[i % TOKENS]!)),
  await measure('TokenService.introspect, 200 tokens', (i) => service.introspect(tokens[i % TOKENS]!)),
]
observer.disconnect()
console.log('| path | calls | garbage collections | heap growth | per call | |')
console.log('|---|--:|--:|--:|--:|---|')
for (const r of rows) console.log(r)
revocations.stop()
await handle.close()
fs.rmSync(dir, { recursive: true, force: true })
