import fs from 'node:fs'
import path from 'node:path'
import fastifyStatic from '@fastify/static'
import type { FastifyPluginAsync } from 'fastify'

export interface ScannerPageDeps {
  /** The built page (`node packages/scanner/build.mjs --page DIR`; `npm run build` writes dist/scanner-page). */
  dir: string
}

/**
 * The page may load its own files and talk to the service that served it, and nothing else: no inline
 * script or style runs, its service worker comes from the same folder, and its forms are never sent (the
 * script handles them), so injected markup stays inert.
 */
const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ')

/**
 * The browser scanner wristband ships: @wristband/scanner's page (packages/scanner/page) at /scanner/, for
 * a phone or a gate PC opened from a device's set-up QR code. Its service worker keeps the page's files,
 * so it opens without the network; its data is in the browser's IndexedDB. Files are revalidated on every
 * load while online (`no-cache`), so a new release reaches the gates at their next reload.
 */
export const scannerPageRoutes: FastifyPluginAsync<ScannerPageDeps> = async (app, { dir }) => {
  if (!fs.existsSync(path.join(dir, 'index.html'))) {
    // `npm run build` (and so the install's `prepare`) builds it; a checkout run by tsx alone has none.
    app.log.info({ dir }, 'the scanner page is not built (npm run build): /scanner/ is not served')
    return
  }
  await app.register(fastifyStatic, {
    root: dir,
    prefix: '/scanner/',
    decorateReply: false,
    // One route per file, found at start; /scanner/ is the page, /scanner redirects to it.
    wildcard: false,
    index: 'index.html',
    redirect: true,
    cacheControl: false,
  })
  app.addHook('onSend', async (request, reply) => {
    if (request.url !== '/scanner' && !request.url.startsWith('/scanner/')) return
    reply.header('cache-control', 'no-cache')
    reply.header('content-security-policy', PAGE_CSP)
  })
}
