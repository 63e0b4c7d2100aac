// The browser files of @wristband/scanner, for pages without a bundler or an import map:
//   dist/browser/scanner.mjs      one ES module (import { Scanner } from './scanner.mjs')
//   dist/browser/scanner.iife.js  a plain <script>: the same exports on window.WristbandScanner
// jose is bundled in (its browser build, WebCrypto only). `npm run build` (and so `prepare`) writes them;
// the browser test builds them afresh from the sources with buildBrowser().
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const here = path.dirname(fileURLToPath(import.meta.url))

/** Writes scanner.mjs and scanner.iife.js into `outdir`; resolves to their paths. */
export async function buildBrowser(outdir = path.join(here, 'dist', 'browser')) {
  const common = {
    entryPoints: [path.join(here, 'src', 'index.ts')],
    bundle: true,
    platform: 'browser',
    target: 'es2022',
    minify: true,
    sourcemap: true,
    legalComments: 'linked',
    logLevel: 'warning',
  }
  const esm = path.join(outdir, 'scanner.mjs')
  const iife = path.join(outdir, 'scanner.iife.js')
  await build({ ...common, format: 'esm', outfile: esm })
  await build({ ...common, format: 'iife', globalName: 'WristbandScanner', outfile: iife })
  return { esm, iife }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await buildBrowser()
