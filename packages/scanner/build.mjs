// The browser files of @wristband/scanner, for pages without a bundler or an import map:
//   dist/browser/scanner.mjs      one ES module (import { Scanner } from './scanner.mjs')
//   dist/browser/scanner.iife.js  a plain <script>: the same exports on window.WristbandScanner
// and the scanner page wristband serves at /scanner/ (page/: index.html, app.js bundled with the package,
// app.css, the service worker sw.js), in dist/page/.
// jose and idb are bundled in (jose's browser build, WebCrypto only). `npm run build` (and so `prepare`)
// writes them; the browser test builds them afresh from the sources with buildBrowser() and buildPage().
// wristband's own build writes the page into its dist/scanner-page/ with `node build.mjs --page DIR`.
import { createHash } from 'node:crypto'
import fs from 'node:fs'
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

/**
 * Writes the scanner page into `outdir`: index.html, app.css, app.js (the page's script with the package
 * bundled in) and sw.js, whose version is a digest of the others, so a changed page is a new worker.
 */
export async function buildPage(outdir = path.join(here, 'dist', 'page')) {
  fs.mkdirSync(outdir, { recursive: true })
  const page = path.join(here, 'page')
  await build({
    entryPoints: [path.join(page, 'app.js')],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    minify: true,
    sourcemap: true,
    legalComments: 'linked',
    logLevel: 'warning',
    outfile: path.join(outdir, 'app.js'),
  })
  const digest = createHash('sha256')
  for (const file of ['index.html', 'app.css'])
    fs.copyFileSync(path.join(page, file), path.join(outdir, file))
  for (const file of ['index.html', 'app.css', 'app.js'])
    digest.update(fs.readFileSync(path.join(outdir, file)))
  const worker = fs.readFileSync(path.join(page, 'sw.js'), 'utf8')
  fs.writeFileSync(
    path.join(outdir, 'sw.js'),
    worker.replace('__VERSION__', digest.digest('hex').slice(0, 16)),
  )
  return outdir
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf('--page')
  if (at >= 0) await buildPage(path.resolve(process.argv[at + 1] ?? path.join(here, 'dist', 'page')))
  else {
    await buildBrowser()
    await buildPage()
  }
}
