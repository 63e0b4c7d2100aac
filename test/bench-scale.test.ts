import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

/**
 * A small `npm run bench:scale` (1,000 vs 10,000) in CI: it loads both copies, runs every measure and
 * prints the table. Only that it runs and prints a figure for each measure is checked, never a time.
 */
const repo = fileURLToPath(new URL('../', import.meta.url))
const skip = !process.env.TEST_DATABASE_URL
  ? 'TEST_DATABASE_URL is not set: bench:scale SKIPPED'
  : !process.env.TEST_REDIS_URL
    ? 'TEST_REDIS_URL is not set: bench:scale SKIPPED'
    : undefined

/** `npm run bench:scale` with these settings, printing only. */
const benchScale = (env: Record<string, string | undefined>) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'bench/scale-bench.ts'], {
    cwd: repo,
    encoding: 'utf8',
    timeout: 15 * 60_000,
    env: { ...process.env, ...env, SCALE_RESULTS: '0' },
  })

test(
  'bench:scale runs small (1,000 vs 10,000) and prints each measure with its growth',
  skip ? { skip } : {},
  () => {
    const run = benchScale({
      BENCH_DATABASE_URL: process.env.TEST_DATABASE_URL,
      BENCH_REDIS_URL: process.env.TEST_REDIS_URL,
      SCALE_SMALL: '1000',
      SCALE_LARGE: '10000',
      SCALE_SAMPLES: '5',
    })
    assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`)
    for (const measure of [
      'stats, dashboard poll, p95',
      "dashboard's event list figures, p95",
      '/metrics scrape (pending deliveries), p95',
      'ticket use while 8 dashboards poll, p95',
      'memory per million refreshes',
      'start-up to /ready, in process',
      'start-up to /ready/verify 200 (list loaded), in process',
      'start-up to /ready, Redis, 2 workers',
      'RSS per million live revocations',
      'retention pass, nothing due',
      'retention, all due: longest batch',
    ])
      assert.match(
        run.stdout,
        new RegExp(`\\| ${measure.replace(/[()/]/g, '\\$&')}[^\\n]*\\| -?[\\d.,]+ (ms|MB) \\|`),
        measure,
      )
    assert.match(run.stdout, /\| measure \| 1,000 \| 10,000 \| growth \| goal \|/)
  },
)

test('bench:scale sync runs small on SQLite (1,000 vs 2,000) and prints each first-sync measure beside its goal', () => {
  const run = benchScale({
    SCALE_DATABASE: 'sqlite',
    SCALE_SECTIONS: 'sync',
    SCALE_SMALL: '1000',
    SCALE_LARGE: '2000',
    SCALE_SYNC_USES: '10',
  })
  assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`)
  const row = (measure: string, figure: string, goal: string) =>
    assert.match(
      run.stdout,
      new RegExp(`\\| ${measure.replace(/[()/,]/g, '\\$&')} \\| ${figure} \\| ${figure} \\| ${goal} \\|`),
      measure,
    )
  row(
    'first sync, one scanner, cold (compact form, brotli, to the delta after it)',
    '[\\d,]+ ms',
    '≤ 3,000 ms',
  )
  row('service RSS added, kept 3 s after', '-?[\\d.]+ MB', '≤ 50 MB')
  row(
    'object form, first sync (gzip)',
    '[\\d,]+ ms, [\\d.]+ MB \\([\\d,]+ tickets\\)',
    '413 above 100,000 tickets',
  )
  row('ticket use p95, during / quiet', '[\\d.]+×', '≤ 1.5×')
  assert.match(run.stdout, /\| first sync \| 1,000 \| 2,000 \| goal \|/)
})
