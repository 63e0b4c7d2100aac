// `prepare` (run by `npm install` / `npm ci` in a checkout): compiles TypeScript into dist/. The
// compiler is a dev dependency, so an install without dev dependencies cannot build: it keeps a dist/
// built earlier (a build stage, or `npm ci` then `npm prune --omit=dev`) and otherwise fails with one
// line that names the production path.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'

let tsc
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
} catch {
  if (fs.existsSync('dist/src/cli.js')) process.exit(0)
  console.error(
    'wristband: dist/ is not built and TypeScript (a dev dependency) is not installed. ' +
      'Install with `npm ci`, then `npm prune --omit=dev` (README, "Production").',
  )
  process.exit(1)
}
const build = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit' })
process.exit(build.status ?? 1)
