// The service's OpenAPI document as GET /openapi.json answers it, built in-process (no listener, an
// in-memory database). `node --import tsx scripts/openapi.ts` prints it; `--out FILE` writes it;
// `--lint` checks it with Redocly CLI against redocly.yaml (offline: no telemetry, no update check)
// and exits non-zero on any error. `npm run lint:openapi` runs the last one (.ci/run does too).
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/platform/config.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

export async function openApiDocument(): Promise<string> {
  const config = loadConfig({
    JWT_SECRET: 'openapi-document-build-secret-0123456789',
    DATABASE_URL: 'sqlite::memory:',
    LOG_LEVEL: 'silent',
    NODE_ENV: 'test',
  })
  const app = await buildApp(config, {})
  try {
    await app.ready()
    const res = await app.inject({ method: 'GET', url: '/openapi.json' })
    if (res.statusCode !== 200) throw new Error(`GET /openapi.json answered ${res.statusCode}`)
    return `${JSON.stringify(res.json(), null, 2)}\n`
  } finally {
    await app.close()
  }
}

function lint(file: string): number {
  const cli = path.join(root, 'node_modules/@redocly/cli/bin/cli.js')
  const run = spawnSync(process.execPath, [cli, 'lint', file, '--format=stylish'], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', CI: 'true' },
  })
  return run.status ?? 1
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const args = process.argv.slice(2)
  const text = await openApiDocument()
  const out = args.includes('--out') ? args[args.indexOf('--out') + 1] : undefined
  if (args.includes('--lint')) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wristband-openapi-'))
    const file = path.join(dir, 'openapi.json')
    fs.writeFileSync(file, text)
    const status = lint(file)
    fs.rmSync(dir, { recursive: true, force: true })
    process.exit(status)
  }
  if (out) fs.writeFileSync(out, text)
  else process.stdout.write(text)
}
