import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import pg from 'pg'

/**
 * A small `npm run bench:checkin` (1,000 vs 3,000 scans) in CI, on SQLite and, with TEST_DATABASE_URL, on
 * PostgreSQL: it fills both copies, times every read and prints the table. Only that it runs, prints a
 * figure for each read and leaves no schema behind is checked, never a time.
 */
const repo = fileURLToPath(new URL('../', import.meta.url))

const benchCheckin = (env: Record<string, string | undefined>) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'bench/checkin-bench.ts'], {
    cwd: repo,
    encoding: 'utf8',
    timeout: 5 * 60_000,
    env: {
      ...process.env,
      BENCH_DATABASE_URL: undefined,
      ...env,
      CHECKIN_BENCH_SMALL: '1000',
      CHECKIN_BENCH_LARGE: '3000',
      CHECKIN_BENCH_READS: '5',
      CHECKIN_RESULTS: '0',
    },
  })

function assertTable(stdout: string) {
  assert.match(
    stdout,
    /\| read \| 1,000 scans, p50 \/ p95 \| 3,000 scans, p50 \/ p95 \| growth, p50 \/ p95 \|/,
  )
  for (const read of [
    '/status`',
    'limit=100`',
    'reason=invalid_time`',
    'result=refused`',
    'device_id=7`',
    'checkin_list_id={list}`',
  ])
    assert.match(
      stdout,
      new RegExp(
        `${read.replace(/[{}]/g, '\\$&')} \\| [\\d.]+ / [\\d.]+ ms \\| [\\d.]+ / [\\d.]+ ms \\| [\\d.]+× / [\\d.]+× \\|`,
      ),
      read,
    )
}

test('bench:checkin runs small on SQLite and prints each read of both copies with its growth', () => {
  const run = benchCheckin({})
  assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`)
  assert.match(run.stdout, /, sqlite, /)
  assertTable(run.stdout)
})

test(
  'bench:checkin runs small on PostgreSQL and drops its two schemas',
  process.env.TEST_DATABASE_URL
    ? {}
    : { skip: 'TEST_DATABASE_URL is not set: bench:checkin on PostgreSQL SKIPPED' },
  async () => {
    const url = process.env.TEST_DATABASE_URL!
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    const schemas = async () =>
      (
        await client.query<{ name: string }>(
          "select nspname as name from pg_namespace where nspname like 'checkin_bench_%' order by 1",
        )
      ).rows.map((r) => r.name)
    try {
      const before = await schemas()
      const run = benchCheckin({ BENCH_DATABASE_URL: url })
      assert.equal(run.status, 0, `${run.stdout}\n${run.stderr}`)
      assert.match(run.stdout, /, postgresql, /)
      assertTable(run.stdout)
      assert.deepEqual(await schemas(), before)
    } finally {
      await client.end()
    }
  },
)
