import { createRequire } from 'node:module'
import path from 'node:path'
import cookie from '@fastify/cookie'
import formbody from '@fastify/formbody'
import fastifyStatic from '@fastify/static'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyError, FastifyReply, FastifyRequest, preParsingAsyncHookHandler } from 'fastify'
import { Type } from 'typebox'
import type { MfaFreshness, ProtectCredentials } from '../mfa/fresh-mfa.js'
import { policyFor } from '../passkeys/passkeys.service.js'
import { safeEqual } from '../platform/digest.js'
import { isDependencyFailure } from '../platform/error-handler.js'
import { AppError, BadRequestError, ForbiddenError, UnauthorizedError } from '../platform/errors.js'
import { randomToken } from '../platform/random.js'
import { perMinute } from '../platform/rate-limit.js'
import { errorResponses } from '../platform/schemas.js'
import { packageRoot } from '../platform/version.js'
import { latestFlaggedCodeUses } from '../tickets/tickets.service.js'
import type { EndSessions } from '../tokens/authority.js'
import { hasScope } from '../tokens/claims.js'
import { claimsOf, protect } from '../tokens/guard.js'
import type { RevocationStore } from '../tokens/revocations.js'
import type { TokenService } from '../tokens/token.service.js'
import { WebhookDeliveries } from '../webhooks/webhooks.service.js'
import { dashboardUsersRoutes } from './dashboard-users.routes.js'
import { deliveriesPageRoutes } from './deliveries.routes.js'
import { devicesPageRoutes } from './devices.routes.js'
import { gatePageRoutes } from './gate.routes.js'
import { passkeyPageRoutes } from './passkeys.routes.js'
import {
  csrfMatches,
  INVALID_SIGN_IN,
  passkeyAccountOf,
  resumeSession,
  SECOND_STEP_MS,
  SESSION_MAX_MS,
  type Session,
  type SessionDeps,
  type SignInResult,
  signIn,
  signInWithTotp,
  signOut,
} from './session.service.js'
import { EventIdParams, EventStats, StatsQuery } from './stats.schemas.js'
import { eventsWithFigures, figuresFor, findEvent, sharedEventStats } from './stats.service.js'
import { eventListPage, eventPage, messagePage, signInPage, totpStepPage } from './templates.js'
import { canSeeEvent, visiblePartners } from './viewers.js'

export interface DashboardDeps extends SessionDeps {
  tokens: TokenService
  /** How long a second factor counts as fresh: adding or removing a passkey needs one. */
  freshness: MfaFreshness
  /** The guard of the dashboard-user routes, which create accounts (fresh MFA while it is on). */
  protectCredentials: ProtectCredentials
  /** Runs due jobs now (a resend from the deliveries page goes out at once). */
  runDueJobs?: () => void
  /** The token authority's way to end an account's sessions (dashboard users). */
  endSessions: EndSessions
  /** The revocation list: a device revoked on the devices page ends its tokens on every instance at once. */
  revocations: Pick<RevocationStore, 'revoke'>
}

const SESSION_COOKIE = 'wb_session'
const LOGIN_CSRF_COOKIE = 'wb_login_csrf'
/** The sign-in waiting for its second step (sealed; see session.service.ts). */
const PENDING_COOKIE = 'wb_login_pending'
/** The form of the TOTP step. */
const CODE_STEP = '/dashboard/login/code'
const INVALID_CODE = 'Invalid code. Enter the current code from your authenticator app.'

/**
 * Pages may load scripts, styles and data from the service itself and nothing else; no inline
 * script or style can run, so injected markup stays inert.
 */
export const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ')

declare module 'fastify' {
  interface FastifyRequest {
    /** The dashboard session of the request, set on session routes. */
    dashboardSession: Session | null
  }
}

/**
 * The web dashboard (`/dashboard`, session cookie) and the same figures for bearer tokens at
 * `GET /events/{event_id}/stats`. Three contexts: the bearer API and the dashboard's JSON keep the
 * JSON error bodies; the pages answer errors with pages and carry their own CSP.
 */
export const dashboardRoutes: FastifyPluginAsyncTypebox<DashboardDeps> = async (app, deps) => {
  await app.register(cookie)
  app.decorateRequest('dashboardSession', null)

  // One shared reader of event figures for both the bearer API and the page's JSON.
  const stats = { ...deps, eventStats: sharedEventStats(deps) }
  await app.register(statsApiRoutes, stats)
  await app.register(dashboardUsersRoutes, deps)
  await app.register(sessionApiRoutes, stats)
  await app.register(pageRoutes, deps)
}

type StatsRouteDeps = DashboardDeps & { eventStats: ReturnType<typeof sharedEventStats> }

const statsApiRoutes: FastifyPluginAsyncTypebox<StatsRouteDeps> = async (app, deps) => {
  app.get(
    '/events/:event_id/stats',
    {
      config: perMinute(120),
      ...protect(deps.tokens),
      schema: {
        tags: ['dashboard'],
        summary: 'Figures of one event: ticket types, balances, uses, webhook health',
        description: 'Needs `reports:read` on the event. The dashboard page reads the same figures.',
        security: [{ OAuth2PasswordBearer: [] }],
        params: EventIdParams,
        querystring: StatsQuery,
        response: { 200: EventStats, ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      const { event_id } = request.params
      if (!hasScope(claimsOf(request), event_id, 'reports:read')) throw new ForbiddenError()
      return deps.eventStats(event_id, request.query.range ?? '24h')
    },
  )
}

/**
 * Reads the session cookie; `required` routes answer 401 (JSON) or go to sign-in (pages) without one.
 * A preParsing hook, like protect(): after the rate limit (onRequest), before body validation.
 */
function loadSession(deps: SessionDeps, required: boolean): preParsingAsyncHookHandler {
  return async (request, _reply, payload) => {
    const token = request.cookies[SESSION_COOKIE]
    request.dashboardSession = token ? await resumeSession(deps, token) : null
    if (required && !request.dashboardSession) throw new UnauthorizedError('Not signed in')
    return payload
  }
}

function sessionOf(request: FastifyRequest): Session {
  if (!request.dashboardSession) throw new UnauthorizedError('Not signed in')
  return request.dashboardSession
}

const sessionApiRoutes: FastifyPluginAsyncTypebox<StatsRouteDeps> = async (app, deps) => {
  const webhooks = new WebhookDeliveries(deps)
  app.get(
    '/dashboard/api/events/:event_id/stats',
    {
      config: perMinute(120),
      preParsing: loadSession(deps, true),
      schema: {
        tags: ['dashboard'],
        summary: 'Figures of one event for the signed-in dashboard page (session cookie)',
        security: [{ DashboardSession: [] }],
        params: EventIdParams,
        querystring: StatsQuery,
        response: { 200: EventStats, ...errorResponses(401, 403, 404) },
      },
    },
    async (request, reply) => {
      const session = sessionOf(request)
      const { event_id } = request.params
      if (!canSeeEvent(session.viewer, event_id)) throw new ForbiddenError()
      reply.header('cache-control', 'no-store')
      return figuresFor(
        deps,
        session.viewer,
        event_id,
        request.query.range ?? '24h',
        deps.eventStats,
        webhooks,
      )
    },
  )
}

const SignInForm = Type.Object(
  {
    username: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
    // Optional in the schema so that a missing token is the CSRF refusal (403), not a 422.
    csrf_token: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { additionalProperties: false },
)

const CodeForm = Type.Object(
  {
    code: Type.String({ pattern: '^[0-9]{6}$' }),
    csrf_token: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { additionalProperties: false },
)

const CsrfForm = Type.Object(
  { csrf_token: Type.Optional(Type.String({ maxLength: 100 })) },
  { additionalProperties: false },
)

const pageRoutes: FastifyPluginAsyncTypebox<DashboardDeps> = async (app, deps) => {
  const webhooks = new WebhookDeliveries(deps)
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

  const secure = (request: FastifyRequest) => request.protocol === 'https'
  /** Passkeys are offered only where they work: with an RP ID (WEBAUTHN_RP_ID in production). */
  const passkeysOn = deps.passkeys.relyingParty !== undefined

  /** A fresh double-submit token for a sign-in form: the cookie now, the form field in the page. */
  function loginCsrf(request: FastifyRequest, reply: FastifyReply): string {
    const csrfToken = randomToken(32)
    reply.setCookie(LOGIN_CSRF_COOKIE, csrfToken, { ...loginCookie(request), maxAge: 60 * 60 })
    return csrfToken
  }

  const loginCookie = (request: FastifyRequest) =>
    ({ path: '/dashboard/login', httpOnly: true, sameSite: 'strict', secure: secure(request) }) as const

  function renderSignIn(request: FastifyRequest, reply: FastifyReply, status: number, error?: string) {
    const csrfToken = loginCsrf(request, reply)
    const body = request.body as { username?: unknown } | undefined
    const username = typeof body?.username === 'string' ? body.username : undefined
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(
        signInPage({
          csrfToken,
          passkeys: passkeysOn,
          ...(username ? { username } : {}),
          ...(error ? { error } : {}),
        }),
      )
  }

  function renderCodeStep(request: FastifyRequest, reply: FastifyReply, status: number, error?: string) {
    const csrfToken = loginCsrf(request, reply)
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(totpStepPage({ csrfToken, passkeys: passkeysOn, ...(error ? { error } : {}) }))
  }

  /** Double-submit check: a sign-in form posted from another site cannot know the cookie's value. */
  function loginCsrfMatches(request: FastifyRequest, given: string | undefined): boolean {
    const expected = request.cookies[LOGIN_CSRF_COOKIE]
    return Boolean(expected && given && safeEqual(expected, given))
  }

  /**
   * Signed in: the session cookie, the sign-in's cookies gone, on to the event list, or to the passkeys
   * page when PASSKEYS_REQUIRED_FOR asks the account to register one.
   */
  async function enterDashboard(
    request: FastifyRequest,
    reply: FastifyReply,
    token: string,
    session: Session,
  ) {
    reply.clearCookie(LOGIN_CSRF_COOKIE, { path: '/dashboard/login' })
    reply.clearCookie(PENDING_COOKIE, { path: '/dashboard/login' })
    reply.setCookie(SESSION_COOKIE, token, {
      path: '/dashboard',
      httpOnly: true,
      sameSite: 'strict',
      secure: secure(request),
      maxAge: SESSION_MAX_MS / 1000,
    })
    const policy = await policyFor(deps.passkeys, passkeyAccountOf(session.viewer))
    return reply.redirect(policy === 'register' ? '/dashboard/passkeys?required=1' : '/dashboard', 303)
  }

  app.setErrorHandler((err: FastifyError, request, reply) => {
    const session = request.dashboardSession ?? undefined
    const page = (status: number, title: string, message: string) =>
      reply
        .code(status)
        .type('text/html; charset=utf-8')
        .send(messagePage(title, message, session))
    const onSignIn = request.routeOptions.url === '/dashboard/login'
    const onCodeStep = request.routeOptions.url === CODE_STEP
    // A domain error's status is the one its code fixes (platform/errors.ts); the page says it for a browser.
    if (err instanceof AppError)
      switch (err.statusCode) {
        case 429: {
          reply.headers(err.headers)
          const message = 'Too many attempts. Wait a minute and try again.'
          if (onSignIn) return renderSignIn(request, reply, 429, message)
          return onCodeStep ? renderCodeStep(request, reply, 429, message) : page(429, 'Slow down', message)
        }
        case 401:
          return reply.redirect('/dashboard/login', 303)
        case 403:
          return page(403, 'Not allowed', 'This account has no access to that page, or the form has expired.')
        case 404:
          return page(404, 'Not found', 'There is no such page or event.')
        case 503:
          return page(503, 'Unavailable', 'The service is temporarily unavailable. Try again shortly.')
      }
    // A form its schema refuses: 400, naming the fields (never a 500, whatever the body). A path or query
    // parameter keeps the service's 422 (integers in canonical decimal, docs/specification.md).
    if (err.validation) {
      const form = err.validationContext === 'body'
      const status = form ? 400 : 422
      if (onSignIn) return renderSignIn(request, reply, status, 'Enter your username and password.')
      if (onCodeStep)
        return renderCodeStep(request, reply, status, 'Enter the 6-digit code from your authenticator app.')
      return form
        ? page(
            400,
            'Invalid form',
            `The form was not filled in as expected: ${invalidFields(err.validation)}.`,
          )
        : page(422, 'Invalid request', 'The request was not understood.')
    }
    if (isDependencyFailure(err))
      return page(503, 'Unavailable', 'The service is temporarily unavailable. Try again shortly.')
    // Errors about the request itself: unparsable body (the JSON parser's SyntaxError), unsupported
    // media type, too large.
    const status = err instanceof SyntaxError ? 400 : (err.statusCode ?? 500)
    if (status >= 400 && status < 500) return page(status, 'Bad request', 'The request was not understood.')
    request.log.error({ err }, 'dashboard page failed')
    return page(500, 'Something went wrong', 'The page could not be shown. Try again shortly.')
  })

  /** Pages answer HTML; `statuses` are the pages a route may answer besides its success. */
  const pageSchema = (summary: string, success: 200 | 303, ...statuses: number[]) => ({
    tags: ['dashboard pages'],
    summary,
    // A page that validates its input: a form refused by its schema is 400, a path or query value 422.
    response: Object.fromEntries(
      [success, ...statuses, ...(statuses.includes(422) ? [400] : []), 429].map((status) => [
        status,
        status === 303
          ? { description: 'See Other: the page to go to next (Location)', type: 'null' }
          : { description: 'HTML page', content: { 'text/html': { schema: { type: 'string' } } } },
      ]),
    ),
  })

  app.get(
    '/dashboard/login',
    {
      config: perMinute(120),
      preParsing: loadSession(deps, false),
      schema: pageSchema('Sign-in page (to the event list when already signed in)', 200, 303),
    },
    async (request, reply) => {
      if (request.dashboardSession) return reply.redirect('/dashboard', 303)
      return renderSignIn(request, reply, 200)
    },
  )

  app.post(
    '/dashboard/login',
    {
      config: perMinute(10),
      schema: {
        ...pageSchema('Sign in: opens a session (cookie) and goes to the event list', 303, 401, 403, 422),
        consumes: ['application/x-www-form-urlencoded'],
        body: SignInForm,
      },
    },
    async (request, reply) => {
      if (!loginCsrfMatches(request, request.body.csrf_token))
        return renderSignIn(request, reply, 403, 'The sign-in form has expired. Please try again.')
      let result: SignInResult
      try {
        result = await signIn(deps, request.body, request.ip)
      } catch (err) {
        if (err instanceof UnauthorizedError) return renderSignIn(request, reply, 401, INVALID_SIGN_IN)
        throw err
      }
      if (result.step === 'done') return enterDashboard(request, reply, result.token, result.session)
      // The password was right and the account has a second step: its form, with the sealed sign-in.
      reply.setCookie(PENDING_COOKIE, result.pending, {
        ...loginCookie(request),
        maxAge: SECOND_STEP_MS / 1000,
      })
      return reply.redirect(result.step === 'passkey' ? '/dashboard/login/passkey' : CODE_STEP, 303)
    },
  )

  app.get(
    CODE_STEP,
    {
      config: perMinute(120),
      schema: pageSchema('The TOTP step of a sign-in (to sign-in without one waiting)', 200, 303),
    },
    async (request, reply) => {
      if (!request.cookies[PENDING_COOKIE]) return reply.redirect('/dashboard/login', 303)
      return renderCodeStep(request, reply, 200)
    },
  )

  app.post(
    CODE_STEP,
    {
      config: perMinute(10),
      schema: {
        ...pageSchema(
          "An administrator's TOTP code after the password: opens the session (the rules of /admin/mfa/verify)",
          303,
          401,
          403,
          422,
        ),
        consumes: ['application/x-www-form-urlencoded'],
        body: CodeForm,
      },
    },
    async (request, reply) => {
      if (!loginCsrfMatches(request, request.body.csrf_token))
        return renderCodeStep(request, reply, 403, 'The form has expired. Please try again.')
      let opened: { token: string; session: Session }
      try {
        opened = await signInWithTotp(deps, request.cookies[PENDING_COOKIE], request.body.code, request.ip)
      } catch (err) {
        if (err instanceof BadRequestError) return renderCodeStep(request, reply, 401, INVALID_CODE)
        if (err instanceof UnauthorizedError) {
          reply.clearCookie(PENDING_COOKIE, { path: '/dashboard/login' })
          return renderSignIn(request, reply, 401, 'The sign-in has expired. Please sign in again.')
        }
        throw err
      }
      return enterDashboard(request, reply, opened.token, opened.session)
    },
  )

  app.post(
    '/dashboard/logout',
    {
      config: perMinute(30),
      preParsing: loadSession(deps, true),
      schema: {
        ...pageSchema('Sign out (needs the session and its CSRF token)', 303, 403, 422),
        consumes: ['application/x-www-form-urlencoded'],
        body: CsrfForm,
      },
    },
    async (request, reply) => {
      const session = sessionOf(request)
      if (!csrfMatches(session, request.body.csrf_token))
        throw new ForbiddenError('CSRF token missing or wrong')
      await signOut(deps, session)
      reply.clearCookie(SESSION_COOKIE, { path: '/dashboard' })
      return reply.redirect('/dashboard/login', 303)
    },
  )

  app.get(
    '/dashboard',
    {
      config: perMinute(120),
      preParsing: loadSession(deps, true),
      schema: pageSchema('The events of the signed-in account (to sign-in without a session)', 200, 303),
    },
    async (request, reply) => {
      const session = sessionOf(request)
      const events = await eventsWithFigures(deps, session.viewer, (eventId) => webhooks.partnersOf(eventId))
      return reply.type('text/html; charset=utf-8').send(eventListPage(session, events))
    },
  )

  app.get(
    '/dashboard/events/:event_id',
    {
      config: perMinute(120),
      preParsing: loadSession(deps, true),
      schema: {
        ...pageSchema(
          "One event's figures, refreshed in place (to sign-in without a session)",
          200,
          303,
          403,
        ),
        params: EventIdParams,
      },
    },
    async (request, reply) => {
      const session = sessionOf(request)
      const { event_id } = request.params
      if (!canSeeEvent(session.viewer, event_id)) throw new ForbiddenError()
      const event = await findEvent(deps, event_id)
      // The tickets' company_ticket_ids are their partners' own: a dashboard user sees its partner's.
      const flaggedCodeUses = await latestFlaggedCodeUses(
        deps,
        event_id,
        session.viewer.partners === 'all'
          ? undefined
          : visiblePartners(session.viewer, await webhooks.partnersOf(event_id)).map((p) => p.id),
      )
      return reply.type('text/html; charset=utf-8').send(eventPage(session, event, flaggedCodeUses))
    },
  )

  // The passkey pages (passkeys.routes.ts), in this context: same error pages, CSP and sign-in helpers.
  await app.register(passkeyPageRoutes, {
    ...deps,
    loadSession: loadSession(deps, true),
    sessionOf,
    pageSchema,
    loginCsrf,
    loginCsrfMatches,
    loginCookie,
    renderSignIn,
    enterDashboard,
    pendingCookie: PENDING_COOKIE,
  })

  // The devices page (devices.routes.ts), in this context: same error pages and CSP.
  await app.register(devicesPageRoutes, {
    ...deps,
    publishRevocation: (entry) => deps.revocations.revoke([entry]),
    loadSession: loadSession(deps, true),
    sessionOf,
    pageSchema,
  })

  // The webhook deliveries page (deliveries.routes.ts), in this context: same error pages and CSP.
  await app.register(deliveriesPageRoutes, {
    ...deps,
    runDueJobs: deps.runDueJobs ?? (() => {}),
    loadSession: loadSession(deps, true),
    sessionOf,
    pageSchema,
  })
  // The gate page (gate.routes.ts): inside counts per check-in list.
  await app.register(gatePageRoutes, { ...deps, loadSession: loadSession(deps, true), sessionOf, pageSchema })
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
