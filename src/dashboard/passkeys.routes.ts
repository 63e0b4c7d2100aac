import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest, preParsingAsyncHookHandler } from 'fastify'
import { Type } from 'typebox'
import { adminMfaEnabled } from '../identities/identities.store.js'
import type { MfaFreshness } from '../mfa/fresh-mfa.js'
import {
  type AuthenticationResponseJSON,
  CHALLENGE_MS,
  finishRegistration,
  hasPasskey,
  passkeysOf,
  policyFor,
  type RegistrationResponseJSON,
  removePasskey,
  startRegistration,
  startSignIn,
} from '../passkeys/passkeys.service.js'
import { AppError, BadRequestError, ForbiddenError, UnauthorizedError } from '../platform/errors.js'
import { perMinute } from '../platform/rate-limit.js'
import {
  csrfMatches,
  passkeyAccountOf,
  pendingViewer,
  type Session,
  type SessionDeps,
  signInWithPasskey,
} from './session.service.js'
import { passkeyStepPage, passkeysPage } from './templates.js'

/** What the dashboard's page context lends its passkey pages (dashboard.routes.ts). */
export interface PasskeyPagesDeps extends SessionDeps {
  freshness: MfaFreshness
  loadSession: preParsingAsyncHookHandler
  sessionOf(request: FastifyRequest): Session
  pageSchema(summary: string, success: 200 | 303, ...statuses: number[]): Record<string, unknown>
  /** A fresh double-submit token of the sign-in forms (the cookie set now). */
  loginCsrf(request: FastifyRequest, reply: FastifyReply): string
  loginCsrfMatches(request: FastifyRequest, given: string | undefined): boolean
  loginCookie(request: FastifyRequest): { path: string; httpOnly: true; sameSite: 'strict'; secure: boolean }
  renderSignIn(request: FastifyRequest, reply: FastifyReply, status: number, error?: string): FastifyReply
  enterDashboard(
    request: FastifyRequest,
    reply: FastifyReply,
    token: string,
    session: Session,
  ): Promise<FastifyReply>
  pendingCookie: string
}

/** The flow token of a ceremony: the challenge is bound to the browser holding it. */
const FLOW_COOKIE = 'wb_passkey_flow'
const SIGN_IN_STEP = '/dashboard/login/passkey'
const MANAGE = '/dashboard/passkeys'
const NOT_ACCEPTED = 'The passkey was not accepted. Try again, or sign in with your password.'
const NEEDS_FRESH =
  'Changing passkeys needs a recent second factor: sign out, then sign in again with your passkey or authenticator code.'

const OptionsAnswer = Type.Object({
  options: Type.Object({}, { additionalProperties: true, description: 'WebAuthn options (JSON form)' }),
})
const jsonSchema = (summary: string, description: string) => ({
  tags: ['dashboard pages'],
  summary,
  description,
  response: {
    200: OptionsAnswer,
    303: {
      description: 'See Other: no session (or the sign-in waiting for its step expired): to sign-in',
      type: 'null',
    },
    ...Object.fromEntries(
      [401, 403, 404, 429].map((s) => [
        s,
        { description: 'HTML page', content: { 'text/html': { schema: { type: 'string' } } } },
      ]),
    ),
  },
})

const AnswerForm = Type.Object(
  {
    response: Type.String({ minLength: 2, maxLength: 32_768 }),
    name: Type.Optional(Type.String({ maxLength: 100 })),
    csrf_token: Type.Optional(Type.String({ maxLength: 100 })),
    password: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
)
const CsrfForm = Type.Object(
  { csrf_token: Type.Optional(Type.String({ maxLength: 100 })) },
  { additionalProperties: false },
)
const IdParams = Type.Object({ id: Type.Integer({ minimum: 1, maximum: 2_147_483_647 }) })
const ManageQuery = Type.Object(
  { required: Type.Optional(Type.Literal('1')), added: Type.Optional(Type.Literal('1')) },
  { additionalProperties: false },
)

/**
 * The browser's answer, as the form carries it (JSON text): an object with the fields every answer has,
 * or a 400 before anything reads it; @simplewebauthn/server checks the rest.
 */
function credentialOf<T>(text: string): T {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new BadRequestError('The passkey answer was not understood')
  }
  const v = value as { id?: unknown; type?: unknown; response?: unknown }
  if (typeof v !== 'object' || v === null || typeof v.id !== 'string' || v.id.length > 1400)
    throw new BadRequestError('The passkey answer was not understood')
  if (v.type !== 'public-key' || typeof v.response !== 'object' || v.response === null)
    throw new BadRequestError('The passkey answer was not understood')
  return value as T
}

/**
 * The dashboard's passkey pages: the sign-in step and button (a first factor, or the second
 * after the password), and the account's passkeys page (add, remove). Options are JSON; the browser's
 * answer comes back in a form, so what follows is a page like any other sign-in's.
 */
export const passkeyPageRoutes: FastifyPluginAsyncTypebox<PasskeyPagesDeps> = async (app, deps) => {
  const passkeys = deps.passkeys
  const flowCookie = (request: FastifyRequest, path: string) => ({
    ...deps.loginCookie(request),
    path,
    maxAge: CHALLENGE_MS / 1000,
  })

  /**
   * An account with a second factor (TOTP on, or a passkey) changes its passkeys only from a session
   * whose second factor is fresh, so a password alone never adds or removes one. Audited when refused.
   */
  async function requireFreshSecondFactor(request: FastifyRequest, session: Session): Promise<void> {
    const account = passkeyAccountOf(session.viewer)
    const secondFactor =
      (account.kind === 'admin' && (await adminMfaEnabled(deps.db, account.id))) ||
      (await hasPasskey(passkeys, account))
    if (!secondFactor) return
    const windowMs = deps.freshness.windowHours * 3_600_000
    if (session.mfaVerifiedAt !== null && deps.clock.now() - session.mfaVerifiedAt <= windowMs) return
    await deps.audit.record({
      kind: 'mfa_required',
      actor: `${account.kind}:${account.id}`,
      ip: request.ip,
      outcome: 'denied',
      detail: { route: `${request.method} ${request.routeOptions.url}` },
    })
    throw new ForbiddenError(NEEDS_FRESH, 'mfa_required')
  }

  function renderStep(request: FastifyRequest, reply: FastifyReply, status: number, error?: string) {
    const csrfToken = deps.loginCsrf(request, reply)
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(passkeyStepPage({ csrfToken, ...(error ? { error } : {}) }))
  }

  async function renderManage(
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    message: { notice?: string; error?: string } = {},
  ) {
    const session = deps.sessionOf(request)
    const account = passkeyAccountOf(session.viewer)
    const list = await passkeysOf(passkeys, account)
    const required = (await policyFor(passkeys, account)) === 'register'
    const notice =
      message.notice ??
      (required
        ? 'Your account must sign in with a passkey (PASSKEYS_REQUIRED_FOR): add one now.'
        : undefined)
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(
        passkeysPage(session, list, {
          available: passkeys.relyingParty !== undefined,
          ...(notice ? { notice } : {}),
          ...(message.error ? { error: message.error } : {}),
        }),
      )
  }

  app.get(
    SIGN_IN_STEP,
    {
      config: perMinute(120),
      schema: deps.pageSchema('The passkey step of a sign-in (to sign-in without one waiting)', 200, 303),
    },
    async (request, reply) => {
      if (!request.cookies[deps.pendingCookie]) return reply.redirect('/dashboard/login', 303)
      return renderStep(request, reply, 200)
    },
  )

  app.post(
    `${SIGN_IN_STEP}/options`,
    {
      // As often as the sign-in page itself, which asks for options as it loads (conditional UI); the
      // attempts are the answers, limited as password sign-ins are.
      config: perMinute(120),
      schema: jsonSchema(
        'Passkey sign-in options for the sign-in page (JSON; the flow in a cookie)',
        "Needs the sign-in form's CSRF token in `x-csrf-token`. After the password (a sign-in waiting for its " +
          'second step) the challenge is bound to that account; otherwise it is a password-less first factor.',
      ),
    },
    async (request, reply) => {
      const given = request.headers['x-csrf-token']
      if (!deps.loginCsrfMatches(request, typeof given === 'string' ? given : undefined))
        throw new ForbiddenError('CSRF token missing or wrong')
      const pending = request.cookies[deps.pendingCookie]
      const viewer = pending ? await pendingViewer(deps, pending) : null
      const { flow, options } = await startSignIn(passkeys, viewer && { kind: viewer.kind, id: viewer.id })
      reply.setCookie(FLOW_COOKIE, flow, flowCookie(request, '/dashboard/login'))
      reply.header('cache-control', 'no-store')
      return { options }
    },
  )

  app.post(
    SIGN_IN_STEP,
    {
      config: perMinute(10),
      schema: {
        ...deps.pageSchema(
          "Sign in with a passkey: the browser's answer; opens the session (first factor, or after the password)",
          303,
          400,
          401,
          403,
          422,
        ),
        consumes: ['application/x-www-form-urlencoded'],
        body: AnswerForm,
      },
    },
    async (request, reply) => {
      const pending = request.cookies[deps.pendingCookie]
      const again = (status: number, error: string) =>
        pending ? renderStep(request, reply, status, error) : deps.renderSignIn(request, reply, status, error)
      if (!deps.loginCsrfMatches(request, request.body.csrf_token))
        return again(403, 'The sign-in form has expired. Please try again.')
      const flow = request.cookies[FLOW_COOKIE]
      reply.clearCookie(FLOW_COOKIE, { path: '/dashboard/login' })
      let opened: Awaited<ReturnType<typeof signInWithPasskey>>
      try {
        const response = credentialOf<AuthenticationResponseJSON>(request.body.response)
        opened = await signInWithPasskey(deps, { pending, flow, response }, request.ip)
      } catch (err) {
        if (err instanceof BadRequestError) return again(400, NOT_ACCEPTED)
        if (err instanceof UnauthorizedError) return again(401, NOT_ACCEPTED)
        throw err
      }
      return deps.enterDashboard(request, reply, opened.token, opened.session)
    },
  )

  app.get(
    MANAGE,
    {
      config: perMinute(120),
      preParsing: deps.loadSession,
      schema: {
        ...deps.pageSchema("The signed-in account's passkeys (to sign-in without a session)", 200, 303),
        querystring: ManageQuery,
      },
    },
    async (request, reply) =>
      renderManage(request, reply, 200, request.query.added ? { notice: 'The passkey was added.' } : {}),
  )

  app.post(
    `${MANAGE}/options`,
    {
      config: perMinute(30),
      preParsing: deps.loadSession,
      schema: jsonSchema(
        'Passkey registration options for the signed-in account (JSON; the flow in a cookie)',
        "Needs the session's CSRF token in `x-csrf-token`, and a fresh second factor when the account has one.",
      ),
    },
    async (request, reply) => {
      const session = deps.sessionOf(request)
      const given = request.headers['x-csrf-token']
      if (!csrfMatches(session, typeof given === 'string' ? given : undefined))
        throw new ForbiddenError('CSRF token missing or wrong')
      await requireFreshSecondFactor(request, session)
      const { flow, options } = await startRegistration(passkeys, passkeyAccountOf(session.viewer))
      reply.setCookie(FLOW_COOKIE, flow, flowCookie(request, MANAGE))
      reply.header('cache-control', 'no-store')
      return { options }
    },
  )

  app.post(
    MANAGE,
    {
      config: perMinute(30),
      preParsing: deps.loadSession,
      schema: {
        ...deps.pageSchema(
          "Add a passkey: the browser's answer to the registration options",
          303,
          400,
          403,
          409,
          422,
        ),
        consumes: ['application/x-www-form-urlencoded'],
        body: AnswerForm,
      },
    },
    async (request, reply) => {
      const session = deps.sessionOf(request)
      if (!csrfMatches(session, request.body.csrf_token))
        throw new ForbiddenError('CSRF token missing or wrong')
      const flow = request.cookies[FLOW_COOKIE]
      reply.clearCookie(FLOW_COOKIE, { path: MANAGE })
      try {
        await requireFreshSecondFactor(request, session)
        const response = credentialOf<RegistrationResponseJSON>(request.body.response)
        await finishRegistration(
          passkeys,
          passkeyAccountOf(session.viewer),
          { flow, response, name: request.body.name, password: request.body.password || undefined },
          request.ip,
        )
      } catch (err) {
        if (err instanceof AppError && [400, 403, 409].includes(err.statusCode))
          return renderManage(request, reply, err.statusCode, {
            error: err.statusCode === 403 ? NEEDS_FRESH : `The passkey was not added: ${err.message}.`,
          })
        throw err
      }
      return reply.redirect(`${MANAGE}?added=1`, 303)
    },
  )

  app.post(
    `${MANAGE}/:id/delete`,
    {
      config: perMinute(30),
      preParsing: deps.loadSession,
      schema: {
        ...deps.pageSchema("Remove one of the signed-in account's passkeys", 303, 403, 404, 422),
        consumes: ['application/x-www-form-urlencoded'],
        params: IdParams,
        body: CsrfForm,
      },
    },
    async (request, reply) => {
      const session = deps.sessionOf(request)
      if (!csrfMatches(session, request.body.csrf_token))
        throw new ForbiddenError('CSRF token missing or wrong')
      try {
        await requireFreshSecondFactor(request, session)
      } catch (err) {
        if (err instanceof ForbiddenError) return renderManage(request, reply, 403, { error: NEEDS_FRESH })
        throw err
      }
      await removePasskey(passkeys, passkeyAccountOf(session.viewer), request.params.id, request.ip)
      return reply.redirect(MANAGE, 303)
    },
  )
}
