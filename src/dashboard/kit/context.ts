import { createRequire } from 'node:module'
import path from 'node:path'
import formbody from '@fastify/formbody'
import fastifyStatic from '@fastify/static'
import type { FastifyError, FastifyInstance } from 'fastify'
import { isDependencyFailure } from '../../platform/error-handler.js'
import { AppError } from '../../platform/errors.js'
import { packageRoot } from '../../platform/version.js'
import { messagePage } from './html.js'
import { sendPage } from './pages.js'

/**
 * Pages may load scripts, styles and data from the service itself and nothing else; no inline
 * script or style can run, so injected markup stays inert.
 */
const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ')

const UNAVAILABLE = 'The service is temporarily unavailable. Try again shortly.'

/**
 * Makes `app` (an encapsulated plugin) the context of the dashboard's pages: url-encoded forms, the
 * assets, the pages' CSP and no caching, and errors answered as pages. Every page plugin is registered
 * inside it.
 */
export async function pageContext(app: FastifyInstance): Promise<void> {
  await app.register(formbody)
  await app.register(fastifyStatic, {
    root: path.join(packageRoot(), 'src', 'dashboard', 'assets'),
    prefix: '/dashboard/assets/',
    index: false,
    // One route per file, found at start: the route table names every asset the dashboard serves.
    wildcard: false,
  })
  await app.register(fastifyStatic, {
    root: path.dirname(createRequire(import.meta.url).resolve('uplot')),
    prefix: '/dashboard/assets/uplot/',
    decorateReply: false,
    index: false,
    wildcard: false,
  })

  // @simplewebauthn/browser's own bundle (window.SimpleWebAuthnBrowser), served as the chart library is.
  await app.register(fastifyStatic, {
    // The package exports only its modules (script/index.js): the bundle is beside them.
    root: path.join(
      path.dirname(createRequire(import.meta.url).resolve('@simplewebauthn/browser')),
      '..',
      'dist',
      'bundle',
    ),
    prefix: '/dashboard/assets/webauthn/',
    decorateReply: false,
    index: false,
    wildcard: false,
  })

  app.addHook('onSend', async (request, reply) => {
    reply.header('content-security-policy', PAGE_CSP)
    if (!request.url.startsWith('/dashboard/assets/')) reply.header('cache-control', 'no-store')
  })

  app.setErrorHandler((err: FastifyError, request, reply) => {
    const session = request.dashboardSession ?? undefined
    const page = (status: number, title: string, message: string) =>
      sendPage(reply, messagePage(title, message, session), status)
    // The sign-in forms answer their own refusals with themselves (route config `formPage`).
    const form = request.routeOptions.config.formPage
    // A domain error's status is the one its code fixes (platform/errors.ts); the page says it for a browser.
    if (err instanceof AppError)
      switch (err.statusCode) {
        case 429: {
          reply.headers(err.headers)
          const message = 'Too many attempts. Wait a minute and try again.'
          return form ? form.render(request, reply, 429, message) : page(429, 'Slow down', message)
        }
        case 401:
          return reply.redirect('/dashboard/login', 303)
        case 403:
          return page(403, 'Not allowed', 'This account has no access to that page, or the form has expired.')
        case 404:
          return page(404, 'Not found', 'There is no such page or event.')
        case 503:
          return page(503, 'Unavailable', UNAVAILABLE)
      }
    // A form its schema refuses: 400, naming the fields (never a 500, whatever the body). A path or query
    // parameter keeps the service's 422 (integers in canonical decimal, docs/specification.md).
    if (err.validation) {
      const isForm = err.validationContext === 'body'
      const status = isForm ? 400 : 422
      if (form) return form.render(request, reply, status, form.invalid)
      return isForm
        ? page(
            400,
            'Invalid form',
            `The form was not filled in as expected: ${invalidFields(err.validation)}.`,
          )
        : page(422, 'Invalid request', 'The request was not understood.')
    }
    if (isDependencyFailure(err)) return page(503, 'Unavailable', UNAVAILABLE)
    // Errors about the request itself: unparsable body (the JSON parser's SyntaxError), unsupported
    // media type, too large.
    const status = err instanceof SyntaxError ? 400 : (err.statusCode ?? 500)
    if (status >= 400 && status < 500) return page(status, 'Bad request', 'The request was not understood.')
    request.log.error({ err }, 'dashboard page failed')
    return page(500, 'Something went wrong', 'The page could not be shown. Try again shortly.')
  })
}

/** The fields a schema refused, as a form names them (`response`, `csrf_token`), for the 400 page. */
function invalidFields(errors: NonNullable<FastifyError['validation']>): string {
  const names = new Set<string>()
  for (const e of errors) {
    const params = e.params as { missingProperty?: unknown; additionalProperty?: unknown }
    const name =
      typeof params.missingProperty === 'string'
        ? params.missingProperty
        : typeof params.additionalProperty === 'string'
          ? params.additionalProperty
          : e.instancePath.split('/').filter(Boolean).join('.')
    names.add(name || 'the form')
  }
  return [...names].join(', ')
}
