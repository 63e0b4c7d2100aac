// `prepare` (run by `npm install` / `npm ci` in a checkout, and for packages/verifier when it is
// installed from its folder): compiles TypeScript into dist/ (and, in the checkout, the scanner page). The compiler is a dev dependency of the
// checkout, so an install without it cannot build: a dist/ built earlier is kept (a build stage, or
// `npm ci` then `npm prune --omit=dev`), and otherwise the install fails with one line naming the way.
//   node scripts/prepare.mjs [BUILT_FILE HINT]
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'

const [
  built = 'dist/src/cli.js',
  hint = 'Install with `npm ci`, then `npm prune --omit=dev` (README, "Production").',
] = process.argv.slice(2)
let tsc
try {
  // The package's exports do not list its bin, so the path is taken from its package.json.
  const manifest = createRequire(`${process.cwd()}/`).resolve('typescript/package.json')
  tsc = path.join(path.dirname(manifest), 'bin', 'tsc')
} catch {
  if (fs.existsSync(built)) process.exit(0)
  console.error(`${built} is not built and TypeScript (a dev dependency) is not installed. ${hint}`)
  process.exit(1)
}
const build = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit' })
if (build.status !== 0) process.exit(build.status ?? 1)
// In the wristband checkout: the scanner page the service serves at /scanner/ (esbuild, a dev dependency
// too, bundles @wristband/scanner into it), into dist/ with the rest, so a pruned install keeps it.
const scannerPage = path.join('packages', 'scanner', 'build.mjs')
if (fs.existsSync(scannerPage)) {
  const page = spawnSync(process.execPath, [scannerPage, '--page', path.join('dist', 'scanner-page')], {
    stdio: 'inherit',
  })
  process.exit(page.status ?? 1)
}
