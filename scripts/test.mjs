// Runs every test file with node's test runner (Node 20 has no glob for --test), after saying which
// backends are in use and which suites will be skipped.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'

const roots = ['src', 'test', 'packages']
const files = roots
  .filter((r) => fs.existsSync(r))
  .flatMap((r) => fs.readdirSync(r, { recursive: true }).map((f) => path.join(r, String(f))))
  .filter((f) => f.endsWith('.test.ts') && !f.includes('node_modules'))
  .filter((f) => process.argv.length <= 2 || process.argv.slice(2).some((a) => f.includes(a)))
  .sort()

const line = '='.repeat(72)
const notes = []
notes.push(
  process.env.TEST_DATABASE_URL
    ? `PostgreSQL: ${process.env.TEST_DATABASE_URL}`
    : 'PostgreSQL: TEST_DATABASE_URL not set -> PostgreSQL suites SKIPPED',
)
notes.push(
  process.env.TEST_REDIS_URL
    ? `Redis: ${process.env.TEST_REDIS_URL}`
    : 'Redis: TEST_REDIS_URL not set -> Redis suites SKIPPED',
)
if (spawnSync('haproxy', ['-v']).status !== 0)
  notes.push('HAProxy: not installed (apt-get install haproxy) -> fleet test SKIPPED')
console.log(`${line}\n${notes.join('\n')}\n${line}`)

// The CLI tests run the compiled binary (bin/wristband.js → dist/), so build what is under test first.
const build = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], {
  stdio: 'inherit',
})
if (build.status !== 0) process.exit(build.status ?? 1)
// The scanner page the service serves (dist/scanner-page), as `npm run build` writes it.
const page = spawnSync(process.execPath, ['packages/scanner/build.mjs', '--page', 'dist/scanner-page'], {
  stdio: 'inherit',
})
if (page.status !== 0) process.exit(page.status ?? 1)

const result = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--test',
    '--test-reporter=spec',
    `--test-concurrency=${process.env.TEST_CONCURRENCY ?? 3}`,
    ...files,
  ],
  { stdio: 'inherit' },
)
process.exit(result.status ?? 1)
